#!/usr/bin/env python3
"""What the trust gate adds before a real load: trust.scan over every file DeepSpeed would open.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_trust_gate.py [--runs 20]

On the cached real baselines (tests/probe_checkpoints.py: ZeRO-0/2/3), zip format, and on the
ZeRO-2 dp-1 baseline re-saved in torch's legacy (non-zip) format, whose pickle is read from the
file (the storage bytes are never read). Prints the median and the max per layout.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def timed(tag_dir: Path, runs: int) -> tuple[float, float, int]:
    from triage.probe import trust

    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        report = trust.scan(str(tag_dir))
        seconds.append(time.perf_counter() - start)
    assert not report.untrusted, report.describe()
    return statistics.median(seconds), max(seconds), len(report.files)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    from tests import probe_checkpoints as pc
    from tests.hostile import payloads

    base = pc.baselines()
    for layout in pc.LAYOUTS:
        tag = base / layout / payloads.TAG
        size = sum(p.stat().st_size for p in tag.iterdir()) / 1e6
        median, worst, files = timed(tag, args.runs)
        print(f"{layout:14s} zip     {files} file(s) {size:6.1f} MB  median {median * 1e3:6.2f} ms  max {worst * 1e3:6.2f} ms")
    with tempfile.TemporaryDirectory() as tmp:
        root = payloads.copy_baseline("z2-dp1-fp32", Path(tmp) / "legacy")
        for shard in sorted((root / payloads.TAG).glob("*.pt")):
            payloads.legacy_clean(root, shard.name)
        median, worst, files = timed(root / payloads.TAG, args.runs)
        print(f"{'z2-dp1-fp32':14s} legacy  {files} file(s)          median {median * 1e3:6.2f} ms  max {worst * 1e3:6.2f} ms")
        shutil.rmtree(root)
    print(f"command: PYTHONPATH=. {sys.executable} benchmarks/bench_trust_gate.py --runs {args.runs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
