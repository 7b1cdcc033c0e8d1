#!/usr/bin/env python3
"""The wall time of one real DeepSpeed load as `repair`, `verify` and `probe --reproduce` run it.

    PYTHONPATH=. DS_ACCELERATOR=cpu .venv/bin/python benchmarks/bench_real_load.py [--runs 5]

triage/repair/real_load.py runs triage/repair/load_check.py under torchrun: the load, one training
step, the verdict written per rank. On the cached real baselines the probe tests train
(tests/probe_checkpoints.py: ZeRO-2 on 1 and on 2 ranks, ZeRO-3 on 2), a passing load each run.
Prints, per layout, the median and max wall time of `real_load.run` and the median time the load
itself reported (torchrun start to exit).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CASES = (("z2-dp1-fp32", 1, 2), ("z2-dp2-fp32", 2, 2), ("z3-dp2-fp32", 2, 3))  # layout, ranks, stage


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from tests import probe_checkpoints as pc
    from tests.repair_support import FACTORY, ext_env
    from triage.repair import real_load
    from triage.repair.plan import LoadSpec

    os.environ.update(ext_env())
    base = pc.baselines()  # trained once per machine and fingerprint, then reused
    print(f"{sys.executable} {' '.join(sys.argv)}  ({os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.2f} at start)")
    for layout, ranks, stage in CASES:
        config = {"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": stage}}
        spec = LoadSpec(mode="resume", load_dir=str(base / layout), tag=None, world_size=ranks, config=config,
                        config_source="the benchmark")
        walls, own = [], []
        for _ in range(args.runs):
            start = time.perf_counter()
            result = real_load.run(spec, FACTORY)
            walls.append(time.perf_counter() - start)
            own.append(result.seconds)
            if not result.ok:
                print(f"{layout}: the load failed: {result.detail}", file=sys.stderr)
                return 1
        print(f"{layout} on {ranks} rank(s), {args.runs} runs: median {statistics.median(walls):.2f} s, "
              f"max {max(walls):.2f} s (torchrun start to exit: median {statistics.median(own):.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
