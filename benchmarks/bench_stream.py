#!/usr/bin/env python3
"""Throughput and peak memory of `ds-triage stream`, side by side with `grep -E`.

    .venv/bin/python benchmarks/bench_stream.py [--mb 300] [--incidents 40] [--envelope plain,fluentbit]

Builds a large log of healthy DeepSpeed training chatter (corpus/clean_chatter.py replays a
real clean run's per-step section with shifted step numbers and times) with whole real
failure logs from corpus/cases sprinkled in, then runs the real CLI on it and `grep -E` over
the same prefilter literals (every trigger and context literal the rules and the parser
need). Checks that every sprinkled incident comes out exactly once, with the category
`classify` gives its log. `--envelope fluentbit` wraps every line in a Fluent Bit record
with Kubernetes metadata (8 pods interleaved; each incident in one pod's stream, the other
pods' chatter in between). Generated files are cached under /tmp/ds-triage-bench.
The suite never runs this.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CACHE = Path("/tmp/ds-triage-bench")
PODS = [f"trainer-{i}" for i in range(8)]


def incident_cases() -> list[tuple[str, str, str]]:
    """(case id, log text, category classify gives) of every corpus log that is one incident."""
    from triage.classify.classifier import classify
    from triage.kb import load_rules
    from triage.stream.emit import is_incident

    rules = load_rules()
    found = []
    for path in sorted((ROOT / "corpus" / "cases").glob("*.log")):
        text = path.read_text(errors="replace")
        report = classify(text, rules=rules)
        if is_incident(report):
            found.append((path.stem, text, report.category))
    return found


def generate(path: Path, mb: int, n_incidents: int, envelope: str, cases) -> list[str]:
    """Write the log; return the categories of the incidents sprinkled in it."""
    from corpus import clean_chatter

    target = mb * 1_000_000
    chosen = [cases[i % len(cases)] for i in range(n_incidents)]
    spacing = target / (n_incidents + 1)  # bytes of chatter before each incident
    chatter = clean_chatter.generate(clean_chatter.DEFAULT_SOURCE, 10**12)
    written, placed, turn = 0, 0, 0
    with open(path, "w") as out:
        write = _writer(out, envelope)
        while written < target or placed < n_incidents:
            if placed < n_incidents and written >= spacing * (placed + 1):
                _, text, _ = chosen[placed]
                pod = PODS[placed % len(PODS)]
                others = itertools.cycle([p for p in PODS if p != pod])
                for line in text.splitlines():
                    written += write(line, pod)
                    if envelope != "plain":
                        written += write(next(chatter), next(others))  # the other pods go on meanwhile
                placed += 1
                continue
            written += write(next(chatter), PODS[turn % len(PODS)])
            turn += 1
    return [c[2] for c in chosen]


def _writer(out, envelope: str):
    clock = itertools.count()

    def plain(line: str, pod: str) -> int:
        out.write(line + "\n")
        return len(line) + 1

    def fluentbit(line: str, pod: str) -> int:
        # Fluent Bit tail (docker parser) + kubernetes filter, as its docs show a record.
        tick = next(clock)
        record = json.dumps({
            "date": 1764709871.25 + tick / 1000, "log": line + "\n", "stream": "stdout",
            "time": "2026-12-02T21:31:11.250000000Z",
            "kubernetes": {"pod_name": pod, "namespace_name": "ml-train", "host": "gpu-node-3",
                           "container_name": "trainer", "docker_id": "2acc5e3b9f", "container_image": "pytorch:24.05"},
        })
        out.write(record + "\n")
        return len(record) + 1

    return plain if envelope == "plain" else fluentbit


def measured(cmd: list[str], stdout) -> tuple[float, int, int]:
    """(wall seconds, peak RSS in MB of that child, exit code)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.DEVNULL, env=dict(os.environ, LC_ALL="C"))
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - start, usage.ru_maxrss // 1024, proc.returncode


def run(envelope: str, args, cases) -> bool:
    from triage.kb import load_rules
    from triage.stream.prefilter import Prefilter

    CACHE.mkdir(exist_ok=True)
    log = CACHE / f"stream-{args.mb}mb-{args.incidents}-{envelope}.log"
    expected_file = log.with_suffix(".expected.json")
    if args.regenerate or not log.exists() or not expected_file.exists():
        print(f"generating {log} ...", file=sys.stderr)
        expected_file.write_text(json.dumps(generate(log, args.mb, args.incidents, envelope, cases)))
    expected = json.loads(expected_file.read_text())
    size = log.stat().st_size
    patterns = CACHE / "prefilter.ere"
    patterns.write_text(Prefilter(load_rules().rules).grep_pattern() + "\n")

    out = CACHE / f"stream-{envelope}.out.jsonl"
    stream_cmd = [str(ROOT / ".venv" / "bin" / "ds-triage"), "stream", "--summary", str(log)]
    if not Path(stream_cmd[0]).exists():
        stream_cmd[:1] = [sys.executable, "-m", "triage"]
    with open(out, "w") as sink:
        s_time, s_rss, s_code = measured(stream_cmd, sink)
    grep_cmd = ["grep", "-E", "-c", "-f", str(patterns), str(log)]
    with open(CACHE / "grep.out", "w") as sink:
        g_time, g_rss, _ = measured(grep_cmd, sink)
    grep_lines = (CACHE / "grep.out").read_text().strip()

    rows = [json.loads(line) for line in out.read_text().splitlines()]
    incidents = [r for r in rows if r.get("kind") == "incident"]
    summary = next((r for r in rows if r.get("kind") == "summary"), {})
    got = [i["classification"]["category"] for i in incidents]
    agree = sum(a == b for a, b in zip(sorted(got), sorted(expected)))
    ok = len(incidents) == len(expected) and agree == len(expected)
    print(f"\n== envelope {envelope}: {log} ({size / 1e6:,.1f} MB, {summary.get('lines', 0):,} lines), "
          f"{len(expected)} real incidents sprinkled from {min(len(cases), len(expected))} corpus cases")
    print(f"  ds-triage stream : {s_time:6.2f} s  {size / 1e6 / s_time:7.1f} MB/s  peak RSS {s_rss:5d} MB  "
          f"incidents {len(incidents)}/{len(expected)}, categories agree {agree}/{len(expected)}, exit {s_code}")
    print(f"  grep -E (LC_ALL=C): {g_time:6.2f} s  {size / 1e6 / g_time:7.1f} MB/s  peak RSS {g_rss:5d} MB  "
          f"{grep_lines} matching lines")
    print(f"  stream / grep    : {g_time / s_time:.2f}x grep's speed")
    print("  commands:")
    print(f"    {' '.join(stream_cmd)} > {out}")
    print(f"    LC_ALL=C {' '.join(grep_cmd)}    # {patterns}: the prefilter's literals as one ERE")
    if not ok:
        print(f"  MISMATCH: expected {sorted(expected)}\n            got      {sorted(got)}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=300, help="size of the generated log (default 300)")
    parser.add_argument("--incidents", type=int, default=40, help="real incident logs sprinkled in (default 40)")
    parser.add_argument("--envelope", default="plain,fluentbit", help="plain, fluentbit, or both (default)")
    parser.add_argument("--regenerate", action="store_true", help="rebuild the cached log")
    args = parser.parse_args()
    cases = incident_cases()
    results = [run(envelope.strip(), args, cases) for envelope in args.envelope.split(",")]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
