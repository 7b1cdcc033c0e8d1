"""The repair actions by name (what rules name in `repairs:`). Strings only: importing this
module imports no action, no torch (triage/kb/validate.py checks rule files against it)."""

from __future__ import annotations

import importlib

# name -> (module, one line for --help and the plan header)
ACTIONS: dict[str, tuple[str, str]] = {
    "latest": ("triage.repair.latest", "point `latest` at the newest complete tag (in place, after a backup)"),
    "fp32": ("triage.repair.fp32", "consolidate the ZeRO shards into one fp32 state dict (DeepSpeed's zero_to_fp32)"),
    "universal": ("triage.repair.universal", "convert to a universal checkpoint for another world size or "
                  "parallel degree (DeepSpeed's ds_to_universal)"),
    "strip-optimizer": ("triage.repair.strip_optimizer", "a weights-only copy without optimizer state "
                        "(for inference or load_module_only)"),
    "config": ("triage.repair.config", "write the ds_config that matches the checkpoint, as a diff against yours"),
}


def names() -> tuple[str, ...]:
    return tuple(ACTIONS)


def action(name: str):
    return importlib.import_module(ACTIONS[name][0])


def summary(name: str) -> str:
    return ACTIONS[name][1]
