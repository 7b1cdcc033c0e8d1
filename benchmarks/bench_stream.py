#!/usr/bin/env python3
"""Throughput and peak memory of `ds-triage stream`, beside `grep -E -c` and `rg -c` on the same file.

    .venv/bin/python benchmarks/bench_stream.py [--mb 150] [--incidents 40] [--pods 12] [--runs 3]
    taskset -c 0 .venv/bin/python benchmarks/bench_stream.py --envelope steps --pods 42 --mb 60 \
        --runs 5 --parsers json --cli /tmp/uservenv/bin/ds-triage -- --jobs 1

Builds a fleet's log from real corpus logs only (corpus/fleet_log.py): whole healthy runs
(corpus/clean) one after another, with whole real failure logs (corpus/cases) among them,
once as a plain file and once as Fluent Bit records of `--pods` pods interleaved. On each
file, in one run: the real CLI (`python -m triage stream --summary`), then `grep -E -c` and
`rg -c` (when installed) over the very literals the stream prefilter searches for (every
trigger and context literal the rules and the parser need, in each JSON escaping). Reports
MB/s, lines/s and peak RSS (median of `--runs`), and checks that each failure log comes out
as exactly one incident; it counts those with the category and top rule `classify` gives the
log alone (a healthy run before it in the same stream may leave context lines rules read).
`stream` reads a large file with a process per core (--jobs; triage/stream/split.py): the row
"stream, 1 process" is `--jobs 1`, and its output must be the default's, byte for byte (but for
the summary's count of records decoded, which is work).
`--envelope steps` is what a training fleet ships most: DeepSpeed's own per-step lines
(`[Rank 0] step=N, skipped=0, lr=[...], mom=[...]`, every one a real line of corpus/clean) as
compact Fluent Bit records trimmed to the stream key (`date`, `log`, `kubernetes.pod_name`:
~180 bytes), `--pods` pods taking turns in bursts of 1-8 records in an order drawn from
`--seed`, the real failure logs among them. `--cli` times an installed `ds-triage` (a
`pip install .` venv) instead of this checkout's `python -m triage`.
Generated files are cached under /tmp/ds-triage-bench. The suite never runs this.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CACHE = Path("/tmp/ds-triage-bench")


STEP_LINE = re.compile(r"\] \[Rank \d+\] step=\d+, skipped=\d+, lr=")  # DeepSpeed's own per-step line
STEP_JOB = 500  # step lines in one healthy job of the `steps` fleet


def steps_fleet(size: int, failures, pods: int) -> list:
    """Healthy jobs of DeepSpeed's real step lines (corpus/clean, in corpus order, each job from
    its own offset), the failure logs among them, job i on pod i % pods (corpus.fleet_log.jobs)."""
    from corpus import fleet_log

    pool = [line for _, lines in fleet_log.clean_logs() for line in lines if STEP_LINE.search(line)]
    clean = [(f"steps-{k}", tuple(pool[(k * 97 + i) % len(pool)] for i in range(STEP_JOB))) for k in range(16)]
    return fleet_log.jobs(size, failures, clean, pods)


def write_steps(path: Path, fleet, seed: int) -> None:
    """Fluent Bit records trimmed to the stream key, pods taking turns in seeded bursts of 1-8 lines
    (a shipper flushes what each file has gathered); each pod's own lines stay in order."""
    from corpus.fleet_log import T0

    rng = random.Random(seed)
    queues: dict[str, list[str]] = {}
    for job in fleet:
        queues.setdefault(job.pod, []).extend(job.lines)
    alive = [[pod, lines, 0] for pod, lines in queues.items()]
    tick = 0
    with open(path, "w", encoding="utf-8") as out:
        while alive:
            entry = rng.choice(alive)
            pod, lines, at = entry
            for line in lines[at:at + rng.randint(1, 8)]:
                out.write(json.dumps({"date": round(T0 + tick / 1000, 3), "log": line + "\n",
                                      "kubernetes": {"pod_name": pod}}, separators=(",", ":")) + "\n")
                tick += 1
                entry[2] += 1
            if entry[2] >= len(lines):
                alive.remove(entry)


def incident_cases(rules) -> list[tuple[str, tuple[str, ...], tuple]]:
    """(name, lines, (category, top rule) classify gives) of every corpus case log that is one incident."""
    from corpus.fleet_log import read_lines
    from triage.classify.classifier import classify
    from triage.stream.emit import is_incident

    found = []
    for path in sorted((ROOT / "corpus" / "cases").glob("*.log")):
        lines = read_lines(path)
        report = classify("\n".join(lines) + "\n", rules=rules)
        if is_incident(report):
            found.append((f"cases/{path.stem}", lines, (report.category, report.top.rule.id if report.top else None)))
    return found


def measured(cmd: list[str], stdout, env: dict) -> tuple[float, float, int, int]:
    """(wall seconds, CPU seconds, peak RSS in MB of the command, exit code). GNU time reports
    CPU and RSS: a child's own ru_maxrss would count the Python process it was forked from."""
    report = CACHE / "time.out"
    timed = ["/usr/bin/time", "-f", "%U %S %M", "-o", str(report), *cmd] if Path("/usr/bin/time").exists() else cmd
    start = time.perf_counter()
    # `python -m` puts the working directory first on sys.path: run each checkout from its own
    cwd = env.get("PYTHONPATH", "").split(os.pathsep)[0] or None
    proc = subprocess.Popen(timed, stdout=stdout, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    if timed is cmd:
        cpu, rss_kb = usage.ru_utime + usage.ru_stime, usage.ru_maxrss
    else:
        user, system, rss_kb = report.read_text().split()[-3:]
        cpu, rss_kb = float(user) + float(system), int(rss_kb)
    return seconds, cpu, rss_kb // 1024, os.waitstatus_to_exitcode(status)


def median_runs(commands: list[tuple[list[str], Path, dict]], runs: int) -> list[tuple[float, float, int, int]]:
    """Each command `runs` times, taking turns (a machine busy with other work slows them alike);
    per command the median wall and CPU seconds, the highest RSS, the last exit code."""
    results: list[list] = [[] for _ in commands]
    for _ in range(runs):
        for n, (cmd, out, env) in enumerate(commands):
            with open(out, "w") as sink:
                results[n].append(measured(cmd, sink, env))
    return [(statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs), max(r[2] for r in rs), rs[-1][3])
            for rs in results]


def check(out: Path, expected: list[tuple[str, tuple]], envelope: str) -> tuple[int, int, dict]:
    """(incidents, those that agree with classify in order per stream, summary)."""
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    incidents = [r for r in rows if r.get("kind") == "incident"]
    summary = next((r for r in rows if r.get("kind") == "summary"), {})
    got: dict[str, list] = defaultdict(list)
    for incident in incidents:
        c = incident["classification"]
        pod = incident["stream"].get("kubernetes.pod_name", "")
        got[pod].append((c["category"], c["hypotheses"][0]["rule_id"] if c["hypotheses"] else None))
    want: dict[str, list] = defaultdict(list)
    for pod, outcome in expected:
        want["" if envelope == "plain" else pod].append(outcome)
    agree = sum(a == b for pod in want for a, b in zip(want[pod], got.get(pod, [])))
    return len(incidents), agree, summary


FAST_JSON = ""  # the record parser `stream` uses by default (set in main)


def bench(envelope: str, fleet, expected, patterns: Path, args, env: dict) -> bool:
    from corpus import fleet_log

    tag = f"{args.mb}mb-{args.incidents}i-{args.pods}p-{args.bulk or 'all'}"
    if envelope == "steps":
        tag = f"steps-{args.mb}mb-{args.incidents}i-{args.pods}p-seed{args.seed}"
    log = CACHE / f"fleet-{tag}.{'log' if envelope == 'plain' else 'jsonl'}"
    if args.regenerate or not log.exists():
        print(f"generating {log} ...", file=sys.stderr)
        if envelope == "steps":
            write_steps(log, fleet, args.seed)
        else:
            fleet_log.write(log, fleet, envelope)
    size = log.stat().st_size
    with open(log, "rb") as f:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 24), b""))

    tools = []
    for label, root in [(f"stream @{args.base}", args.base_root)] if args.base else []:
        tools.append((label, [sys.executable, "-m", "triage", "stream", "--summary", *args.stream_args, str(log)],
                      CACHE / f"stream-base-{envelope}.jsonl", dict(env, PYTHONPATH=str(root))))
    stream = [args.cli] if args.cli else [sys.executable, "-m", "triage"]
    tools.append(("ds-triage stream", [*stream, "stream", "--summary", *args.stream_args, str(log)],
                  CACHE / f"stream-{envelope}.jsonl", env))
    default = tools[-1][1]
    for parser in [] if envelope == "plain" else [p for p in args.parsers.split(",") if p and p != FAST_JSON]:
        tools.append((f"stream, {parser}", default, CACHE / f"stream-{parser}-{envelope}.jsonl",
                      dict(env, DS_TRIAGE_JSON=parser)))
    if "--jobs" not in args.stream_args:  # the default reads a large file with a process per core
        at = default.index("--summary") + 1
        tools.append(("stream, 1 process", [*default[:at], "--jobs", "1", *default[at:]],
                      CACHE / f"stream-1-process-{envelope}.jsonl", env))
    tools.append(("grep -E -c", ["grep", "-E", "-c", "-f", str(patterns), str(log)], CACHE / "grep.out", env))
    if shutil.which("rg"):
        tools.append(("rg -c", ["rg", "--no-config", "-c", "-f", str(patterns), str(log)], CACHE / "rg.out", env))

    print(f"\n== {envelope}: {log} ({size / 1e6:,.1f} MB, {lines:,} lines, {size / lines:.0f} bytes a line, "
          f"{len(expected)} real failure logs among {len(fleet) - len(expected):,} healthy runs"
          f"{'' if envelope == 'plain' else f', {args.pods} pods interleaved'})")
    print(f"  {'':18} {'wall s':>7} {'MB/s':>7} {'records/s':>10} {'CPU s':>7} {'MB/CPU-s':>9} {'rec/CPU-s':>10} "
          f"{'peak RSS':>9}")
    ok, rates = True, {}
    timings = median_runs([(cmd, out, cmd_env) for _, cmd, out, cmd_env in tools], args.runs)
    for (name, cmd, out, _), (seconds, cpu, rss, code) in zip(tools, timings):
        rates[name] = size / 1e6 / seconds
        if name.startswith(("ds-triage", "stream")):
            found, agree, summary = check(out, expected, envelope)
            ok = ok and found == len(expected)
            result = (f"{found} incidents / {len(expected)} failure logs, {agree} as classify alone; "
                      f"{summary.get('evicted', '?')} evicted, exit {code}")
            if name == "stream, 1 process":
                same = _without_work(out) == _without_work(tools[0 if not args.base else 1][2])
                ok = ok and same
                result += f"; {'the same output' if same else 'NOT the same output'} as with a process per core"
        else:
            result = f"{out.read_text().strip()} matching lines"
        per = cpu or float("nan")  # a small file can take grep under GNU time's 10 ms resolution
        print(f"  {name:18} {seconds:7.2f} {rates[name]:7.1f} {lines / seconds:10,.0f} {cpu:7.2f} {size / 1e6 / per:9.1f} "
              f"{lines / per:10,.0f} "
              f"{rss:6d} MB   {result}")
    for name in rates:
        if not name.startswith(("ds-triage", "stream")):
            print(f"  stream / {name}: {rates['ds-triage stream'] / rates[name]:.2f}")
    print(f"  commands (each run {args.runs} times in turn; medians):")
    for _, cmd, out, cmd_env in tools:
        prefix = "LC_ALL=C " if cmd[0] == "grep" else ""
        if cmd[0] == args.cli:
            prefix = f"DS_TRIAGE_JSON={cmd_env['DS_TRIAGE_JSON']} " if "DS_TRIAGE_JSON" in cmd_env else ""
        elif cmd[0] == sys.executable:
            root = cmd_env["PYTHONPATH"].split(os.pathsep)[0]
            prefix = f"cd {root} && PYTHONPATH={root} "
            prefix += f"DS_TRIAGE_JSON={cmd_env['DS_TRIAGE_JSON']} " if "DS_TRIAGE_JSON" in cmd_env else ""
        print(f"    {prefix}{shlex.join(cmd)} > {out}")
    return ok


def _without_work(path: Path) -> list[dict]:
    """The output but the summary's time and its count of records decoded (work, which children
    reading parts from an empty state can make larger: triage/stream/split.py)."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for record in records:
        record.pop("seconds", None)
        if record.get("kind") == "summary":
            record.pop("records", None)
    return records


def worktree(rev: str) -> Path:
    """A checkout of `rev` to run the stream of (git worktree, made once, under the cache)."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", rev], capture_output=True, text=True, check=True).stdout.strip()
    path = CACHE / f"base-{commit[:12]}"
    if not path.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), commit], check=True,
                       stdout=subprocess.DEVNULL)
    return path


def main() -> int:
    from corpus import fleet_log
    from triage.kb import load_rules
    from triage.stream.prefilter import Prefilter
    from triage.stream.records import fast_parser

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=150, help="MB of log text in the healthy runs and failures (default 150)")
    parser.add_argument("--incidents", type=int, default=40, help="real failure logs placed among them (default 40)")
    parser.add_argument("--pods", type=int, default=12, help="pods of the Fluent Bit file (default 12)")
    parser.add_argument("--bulk", metavar="CLEAN_LOG", help="replicate this one corpus/clean log (a stem) instead of all")
    parser.add_argument("--envelope", default="plain,fluentbit",
                        help="plain, fluentbit, steps (DeepSpeed's step lines as trimmed Fluent Bit records), "
                        "comma-separated (default plain,fluentbit)")
    parser.add_argument("--seed", type=int, default=44, help="the order the pods' records of `steps` take turns in")
    parser.add_argument("--cli", metavar="DS_TRIAGE", help="an installed ds-triage to time (a pip-installed venv's "
                        "bin/ds-triage) instead of `python -m triage` of this checkout")
    parser.add_argument("--runs", type=int, default=3, help="runs of each command; the median is shown (default 3)")
    parser.add_argument("--regenerate", action="store_true", help="rebuild the cached files")
    parser.add_argument("--parsers", default="orjson,json",
                        help="also run the JSON file with these record parsers (DS_TRIAGE_JSON; default orjson,json)")
    parser.add_argument("--base", metavar="REV", help="also run `stream` as of this git revision (a worktree), in turn with this one")
    parser.add_argument("stream_args", nargs="*", help="more options for `ds-triage stream` (after --)")
    args = parser.parse_args()

    rules = load_rules()
    cases = incident_cases(rules)
    chosen = [cases[i * len(cases) // args.incidents] for i in range(args.incidents)]
    fleet = fleet_log.jobs(args.mb * 1_000_000, [(n, lines) for n, lines, _ in chosen],
                           fleet_log.clean_logs(args.bulk), args.pods)
    outcome = {name: want for name, _, want in chosen}
    expected = [(job.pod, outcome[job.name]) for job in fleet if job.failure]
    CACHE.mkdir(exist_ok=True)
    patterns = CACHE / "prefilter.ere"
    patterns.write_text(Prefilter(rules.rules).grep_pattern() + "\n")
    global FAST_JSON
    FAST_JSON = fast_parser()[0]
    args.base_root = worktree(args.base) if args.base else None
    env = dict(os.environ, LC_ALL="C", PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    print(f"{sys.executable} {shlex.join(sys.argv)}   ({os.cpu_count()} CPUs; {patterns}: the prefilter's literals as one ERE)")
    steps = steps_fleet(args.mb * 1_000_000, [(n, lines) for n, lines, _ in chosen], args.pods)
    results = [bench(e.strip(), steps if e.strip() == "steps" else fleet,
                     [(job.pod, outcome[job.name]) for job in steps if job.failure] if e.strip() == "steps" else expected,
                     patterns, args, env) for e in args.envelope.split(",")]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
