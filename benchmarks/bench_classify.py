#!/usr/bin/env python3
"""Speed of `ds-triage classify`: cold CLI runs and warm library calls.

    .venv/bin/python benchmarks/bench_classify.py [--runs 15] [--cli VENV/bin/ds-triage]

Prints the median cold time of `ds-triage classify` on a 5,000-line trace
beside `python3 -c pass` measured in the same run (the ratio cancels machine
speed), wall clock and CPU time (getrusage of the child: steadier than the wall
clock on a shared machine), and the warm library call's median and p95 (wall and
CPU). Goals: cold <= 4x `python3 -c pass`, warm p95 <= 25 ms.

`--cli` times an installed `ds-triage` (a `pip install .` venv: what a user runs) against its
own venv's `python -c pass`; without it, `python -m triage` of this checkout under this
interpreter (a dev venv's editable install slows `python -c pass` itself by its import finder).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def five_thousand_lines(case: Path) -> str:
    """A real failing-load log padded to 5,000 lines with real healthy chatter."""
    failure = case.read_text()
    chatter_file = next(iter(sorted((ROOT / "corpus" / "clean").glob("*.log"))), None)
    chatter = chatter_file.read_text().splitlines() if chatter_file else ["[INFO] step"]
    lines: list[str] = []
    need = 5000 - len(failure.splitlines())
    while len(lines) < need:
        lines.extend(chatter)
    return "\n".join(lines[:need]) + "\n" + failure


def timed(cmd: list[str], env: dict, cpu: list[float] | None = None) -> float:
    """Wall seconds of one run; its CPU seconds (user + system) appended to `cpu`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if cpu is not None:
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return wall


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--case", default=str(ROOT / "corpus" / "cases" / "zero3-saved-stage2-load-dp2.log"))
    parser.add_argument("--cli", metavar="DS_TRIAGE", help="an installed ds-triage to time (e.g. a pip-installed "
                        "venv's bin/ds-triage), against that venv's python -c pass")
    args = parser.parse_args()
    text = five_thousand_lines(Path(args.case))
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "trace.log"
        log.write_text(text)
        env = dict(os.environ, XDG_CACHE_HOME=str(Path(tmp) / "cache"))
        python = str(Path(args.cli).parent / "python") if args.cli else sys.executable
        cli = [args.cli, "classify", str(log)] if args.cli else [python, "-m", "triage", "classify", str(log)]
        timed(cli, env)  # fills the compiled-rule cache, as any first run does
        baseline, cold, baseline_cpu, cold_cpu = [], [], [], []
        for _ in range(args.runs):
            baseline.append(timed([python, "-c", "pass"], env, baseline_cpu))
            cold.append(timed(cli, env, cold_cpu))
        os.environ["XDG_CACHE_HOME"] = env["XDG_CACHE_HOME"]
        from triage.classify.classifier import classify
        from triage.kb import load_rules

        rules = load_rules()
        warm, warm_cpu = [], []
        for _ in range(max(args.runs * 4, 50)):
            start, start_cpu = time.perf_counter(), time.process_time()
            classify(text, rules=rules)
            warm.append(time.perf_counter() - start)
            warm_cpu.append(time.process_time() - start_cpu)
        # With the cache warm, as every run after the first: the classify path's imports.
        imported = subprocess.run(
            [python, "-c", "import sys, runpy; sys.argv=['triage','classify',%r]; "
             "import triage.cli as c; c.main(sys.argv[1:]);"
             "print('torch' in sys.modules, 'deepspeed' in sys.modules, 'jsonschema' in sys.modules, file=sys.stderr)" % str(log)],
            capture_output=True, text=True, env=env,
        ).stderr.strip().splitlines()[-1:]
    lines = len(text.splitlines())
    b, c = statistics.median(baseline), statistics.median(cold)
    p95 = statistics.quantiles(warm, n=20)[-1]
    bc, cc = statistics.median(baseline_cpu), statistics.median(cold_cpu)
    print(f"command: {' '.join([Path(sys.executable).name] + sys.argv)}")
    print(f"timed: {' '.join(cli[:-1])} TRACE   against   {python} -c pass")
    print(f"input: {lines} lines, {len(text) / 1024:.0f} KiB; rules: {len(rules.rules)}")
    print(f"python3 -c pass          median {b * 1000:7.1f} ms wall  {bc * 1000:7.1f} ms CPU")
    print(f"ds-triage classify cold  median {c * 1000:7.1f} ms wall  {cc * 1000:7.1f} ms CPU  "
          f"({c / b:.1f}x python startup wall, {cc / bc:.1f}x CPU; goal <= 4x)")
    print(f"classify() warm          median {statistics.median(warm) * 1000:7.1f} ms  p95 {p95 * 1000:.1f} ms wall; "
          f"CPU median {statistics.median(warm_cpu) * 1000:.1f} ms  p95 {statistics.quantiles(warm_cpu, n=20)[-1] * 1000:.1f} ms "
          f"(goal p95 <= 25 ms)")
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    print(f"torch/deepspeed/jsonschema imported by classify: {imported}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
