#!/usr/bin/env python3
"""Throughput of `ds-triage batch` in Spark local mode with 1 and 2 executor cores, and the scaling.

    .venv/bin/python benchmarks/bench_batch.py [--mb 40] [--incidents 20] [--pods 12] [--runs 1]

Builds a fleet's logs from real corpus logs only (corpus/fleet_log.py, as bench_stream.py
does): whole healthy runs (corpus/clean) with whole real failure logs (corpus/cases) among
them, once as plain files, one job a file (what batch reads from a log bucket), and once as
Fluent Bit records of `--pods` pods interleaved, cut into `--objects` files as a shipper's
hourly objects (each pod's stream spans them). On each, the real CLI (`python -m triage batch
... --master local[N]`) with N = 1 and 2, in turn. Reports the job's own time (from the
totals batch prints: the JVM's start-up excluded) as MB/s and lines/s, the command's wall time
with start-up, the scaling from 1 to 2 cores, and checks that each failure log came out as one
incident. Generated files are cached under /tmp/ds-triage-bench. The suite never runs this.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CACHE = Path("/tmp/ds-triage-bench")
CORES = (1, 2)


def inputs(envelope: str, fleet, args) -> tuple[Path, int, int]:
    """The input directory (made once), its bytes and lines."""
    from corpus import fleet_log

    tag = f"{args.mb}mb-{args.incidents}i-{args.pods}p-{args.objects}o"
    folder = CACHE / f"batch-{envelope}-{tag}"
    if args.regenerate and folder.exists():
        shutil.rmtree(folder)
    if not folder.exists():
        print(f"generating {folder} ...", file=sys.stderr)
        work = folder.with_suffix(".tmp")
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        if envelope == "plain":
            for n, job in enumerate(fleet):  # one job a file
                (work / f"{n:05d}-{job.name.replace('/', '-')}.log").write_text("\n".join(job.lines) + "\n")
        else:
            lines = list(fleet_log.fluentbit_lines(fleet))
            step = -(-len(lines) // args.objects)
            for n in range(args.objects):
                part = lines[n * step:(n + 1) * step]
                (work / f"2025-12-02T{21 + n:02d}.jsonl").write_text("\n".join(part) + "\n")
        work.rename(folder)
    size = lines = 0
    for path in folder.iterdir():
        data = path.read_bytes()
        size, lines = size + len(data), lines + data.count(b"\n")
    return folder, size, lines


def measured(cmd: list[str], env: dict) -> tuple[float, dict, int]:
    """(wall seconds with start-up, the totals batch printed, exit code)."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, env=env, cwd=ROOT)
    seconds = time.perf_counter() - start
    try:
        totals = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    except (IndexError, ValueError):
        sys.exit(f"batch failed (exit {proc.returncode}): {proc.stderr.decode()[-2000:]}")
    return seconds, totals, proc.returncode


def bench(envelope: str, fleet, failures: int, args, env: dict) -> bool:
    folder, size, lines = inputs(envelope, fleet, args)
    files = sum(1 for _ in folder.iterdir())
    print(f"\n== {envelope}: {folder} ({size / 1e6:,.1f} MB, {lines:,} lines, {files:,} files, "
          f"{failures} real failure logs among {len(fleet) - failures:,} healthy runs"
          f"{'' if envelope == 'plain' else f', {args.pods} pods interleaved'})")
    print(f"  {'':10} {'job s':>7} {'MB/s':>7} {'lines/s':>10} {'wall s':>7}   incidents")
    commands, results = [], {c: [] for c in CORES}
    extra = ["--input-format", "fluentbit"] if envelope != "plain" else []
    for run in range(args.runs):
        for cores in CORES:  # in turn: a machine busy with other work slows both alike
            out = CACHE / f"batch-out-{envelope}-{cores}"
            shutil.rmtree(out, ignore_errors=True)
            cmd = [sys.executable, "-m", "triage", "batch", str(folder), "--out", str(out),
                   "--master", f"local[{cores}]", *extra, *args.batch_args]
            if run == 0:
                commands.append(cmd)
            results[cores].append(measured(cmd, env))
    ok, rates = True, {}
    for cores in CORES:
        job = statistics.median(t["seconds"] for _, t, _ in results[cores])
        wall = statistics.median(w for w, _, _ in results[cores])
        _, totals, code = results[cores][-1]
        rates[cores] = size / 1e6 / job
        found = totals["incidents"]
        ok = ok and found == failures
        print(f"  local[{cores}]   {job:7.1f} {rates[cores]:7.2f} {lines / job:10,.0f} {wall:7.1f}   "
              f"{found} / {failures} failure logs ({totals['checkpoint_incidents']} checkpoint-loading), exit {code}")
    print(f"  scaling 1 -> 2 cores: {rates[2] / rates[1]:.2f}x")
    print(f"  commands (each run {args.runs} times in turn; medians; job s = the totals' seconds, wall s with the JVM's start-up):")
    for cmd in commands:
        print(f"    cd {ROOT} && PYTHONPATH={ROOT} {shlex.join(cmd)}")
    return ok


def main() -> int:
    from benchmarks.bench_stream import incident_cases
    from corpus import fleet_log
    from triage.kb import load_rules

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=40, help="MB of log text (default 40)")
    parser.add_argument("--incidents", type=int, default=20, help="real failure logs placed among them (default 20)")
    parser.add_argument("--pods", type=int, default=12, help="pods of the Fluent Bit records (default 12)")
    parser.add_argument("--objects", type=int, default=4, help="files the Fluent Bit records are cut into (default 4)")
    parser.add_argument("--envelope", default="plain,fluentbit", help="plain, fluentbit, or both (default)")
    parser.add_argument("--runs", type=int, default=1, help="runs of each command; the median is shown (default 1)")
    parser.add_argument("--regenerate", action="store_true", help="rebuild the cached inputs")
    parser.add_argument("batch_args", nargs="*", help="more options for `ds-triage batch` (after --)")
    args = parser.parse_args()

    cases = incident_cases(load_rules())
    chosen = [cases[i * len(cases) // args.incidents] for i in range(args.incidents)]
    fleet = fleet_log.jobs(args.mb * 1_000_000, [(n, lines) for n, lines, _ in chosen], fleet_log.clean_logs(),
                           args.pods)
    failures = sum(job.failure for job in fleet)
    CACHE.mkdir(exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    print(f"{sys.executable} {shlex.join(sys.argv)}   ({os.cpu_count()} CPUs)")
    results = [bench(e.strip(), fleet, failures, args, env) for e in args.envelope.split(",")]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
