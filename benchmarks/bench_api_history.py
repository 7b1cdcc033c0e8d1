#!/usr/bin/env python3
"""What the API history costs classify (issue 18, point 3).

    .venv/bin/python benchmarks/bench_api_history.py [--runs 21] [--before DIR]

Prints the median cold `ds-triage classify` time on a real case log (no skew: the index
is never read) and on a version-skew log (the index is read), runs interleaved so machine
load hits both alike; with --before DIR (e.g. `git archive <rev> | tar -x -C DIR`) also the
case log on that tree. Then the in-process cost of reading the index and naming one skew.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CASE = ROOT / "corpus" / "cases" / "job-zero3-train-then-stage2-load.log"
SKEW = ('Traceback (most recent call last):\n  File "/workspace/train.py", line 112, in <module>\n'
        "    engine.optimizer._restore_from_fp16_weights()\n"
        "AttributeError: 'DeepSpeedZeroOptimizer' object has no attribute '_restore_from_fp16_weights'\n")


def cold(tree: Path, log: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(tree))
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "triage", "classify", str(log)], env=env, cwd=tree, capture_output=True)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--before", type=Path, help="a checkout without the API history")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        skew = Path(tmp) / "skew.log"
        skew.write_text(SKEW)
        series = {"case log": (ROOT, CASE), "skew log": (ROOT, skew)}
        if args.before:
            series["case log, --before"] = (args.before, CASE)
        times: dict[str, list[float]] = {name: [] for name in series}
        for tree, log in series.values():
            cold(tree, log)  # warm the rules cache and the page cache
        for _ in range(args.runs):
            for name, (tree, log) in series.items():
                times[name].append(cold(tree, log))
    print(f"$ {' '.join(sys.argv)}")
    for name, values in times.items():
        print(f"cold classify, {name}: median {statistics.median(values):.0f} ms over {args.runs} runs")
    from triage.classify.classifier import classify
    from triage.kb.api_history import load_index
    start = time.perf_counter()
    load_index()
    loaded = time.perf_counter()
    classify(SKEW)
    print(f"in process: reading api_history.json {1000 * (loaded - start):.1f} ms; "
          f"classify of the skew log after it {1000 * (time.perf_counter() - loaded):.1f} ms")


if __name__ == "__main__":
    main()
