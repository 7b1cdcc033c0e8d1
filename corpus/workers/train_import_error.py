"""A training script with a stale import (the symbol does not exist in this DeepSpeed)."""
import deepspeed  # noqa: F401
from deepspeed.runtime.zero.stage_1_and_2 import DeepSpeedZeroOptimizer_Stage1  # noqa: F401,E402

print("unreachable")
