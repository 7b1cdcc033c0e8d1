#!/usr/bin/env python3
"""Speed of classify on logs built to make regexes slow (issue 16, "Linear-time matching").

    .venv/bin/python benchmarks/bench_hostile_logs.py [--sizes 2,8,32] [--old-cap 10] [--paste 100000]
        [--parts 1,2,3] [--cost-mb 4.5] [--seeds 4] [--repeats 3]

1. Each attack of tests/hostile/logs.py in a 100 KB paste: the regex it was built against, as
   it was before it was rewritten (capped at --old-cap seconds), beside `classify` of the
   paste today (and the probe's log reading for target.LOG_WORLD).
2. A real log with every attack in its middle, at each of --sizes MiB: classify's wall time
   and MB/s, and the ratio to the smaller size before it (linear: the size ratio).
3. Cost per byte (issue 40, findings 9 and 13), each log of --cost-mb MB beside a healthy log of
   the same size (corpus/clean/ replicated): fuzzed real logs (--seeds of them, and the same
   without their `Traceback` headers), 16,000 distinct `KeyError` lines and as many as fill the
   size, each distinct shape of real error line repeated (tests.hostile.logs.error_lines), and
   one line of the whole size. CPU seconds (the best of --repeats runs: a shared machine's
   wall clock measures its neighbours), MB/s, and the ratio to the healthy log; the goal: 3x.

Speed goals live here, not in the suite: tests/test_linear_regex.py checks the growth only.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.hostile.logs import (ATTACKS, error_lines, fuzzed, healthy, hostile_log, line_shapes, numbered,  # noqa: E402
                                 old_run, paste, repeated)
from triage.classify.classifier import classify  # noqa: E402
from triage.kb.pump import Budget  # noqa: E402
from triage.kb import load_rules  # noqa: E402


def timed_old(name: str, size: int, cap: float) -> float | None:
    """CPU seconds the old regex takes on its attack; None when over `cap` seconds."""
    with Budget(cap) as budget:
        seconds = budget.timed(old_run(name), ATTACKS[name][0](size), 1)
    return None if seconds == float("inf") else seconds


def timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def cpu(call, repeats: int = 1) -> float:
    """The fewest CPU seconds of `repeats` calls."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        call()
        best = min(best, time.process_time() - start)
    return best


def cost_per_byte(rules, megabytes: float, seeds: int, repeats: int) -> None:
    size = int(megabytes * 1e6)

    def per_byte(text: str) -> float:
        return cpu(lambda: classify(text, rules=rules), repeats) / len(text)

    base = per_byte(healthy(size))
    print(f"3. cost per byte: each log beside a healthy one of its size (corpus/clean/ replicated; CPU s, best of {repeats})")
    print(f"   {'log':56} {'MB':>6} {'CPU s':>7} {'MB/s':>6} {'x healthy':>9}")

    def row(name: str, text: str, against: float = base) -> float:
        cost = per_byte(text)
        print(f"   {name:56} {len(text) / 1e6:6.2f} {cost * len(text):7.2f} {1e-6 / cost:6.1f} {cost / against:8.1f}x")
        return cost / against

    row("healthy", healthy(size))
    worst = 0.0
    for seed in range(seeds):
        worst = max(worst, row(f"fuzzed real log, seed {seed}", fuzzed(size, seed)))
        worst = max(worst, row(f"fuzzed real log, seed {seed}, no Traceback header", fuzzed(size, seed, headers=False)))
    print(f"   worst fuzzed: {worst:.1f}x the healthy log's time per byte (goal: 3x)")
    found = error_lines()
    keyerror = min((line for line in found if "KeyError: '" in line), key=len)
    small = numbered(keyerror, 16_000)
    row("16,000 distinct KeyError lines (vs healthy of their size)", small, per_byte(healthy(len(small))))
    row("distinct KeyError lines filling the size", numbered(keyerror, size // (len(keyerror) + 4)))
    shapes = line_shapes(found)
    costs = sorted(((per_byte(repeated(line, size)) / base, line) for line in shapes.values()), reverse=True)
    print(f"   each of {len(shapes)} shapes of {len(found)} distinct real error lines repeated to {megabytes:g} MB: "
          f"median {costs[len(costs) // 2][0]:.1f}x, worst {costs[0][0]:.1f}x the healthy log's time per byte")
    for ratio, line in costs[:3]:
        print(f"     {ratio:4.1f}x  {line[:100]}")
    row("one line of the whole size (an exception's message)", "RuntimeError: " + "failed to load shard " * (size // 21) + "\n")


def attacks_pasted(rules, args) -> None:
    print(f"1. a {args.paste:,}-character attack, pasted after the last 40 lines of a real failing log")
    print(f"   {'regex (as it was)':28} {'old regex':>12} {'classify now':>13}")
    for name in ATTACKS:
        old = None if args.skip_old else timed_old(name, args.paste, args.old_cap)
        old_text = "-" if args.skip_old else (f"> {args.old_cap:g} s" if old is None else f"{old:.3f} s")
        text = paste(name, args.paste)
        if name == "target.LOG_WORLD":  # the probe's reading of the log, not classify, runs it
            from triage.probe.target import from_args

            now = timed(lambda: from_args(None, None, None, text))
        else:
            now = timed(lambda: classify(text, rules=rules))
        print(f"   {name:28} {old_text:>12} {now:>11.3f} s")


def attacks_in_a_log(rules, args) -> None:
    print("2. a real failing log with every attack repeated in its middle (blocks of 100 KB)")
    previous = None
    for mib in (int(x) for x in args.sizes.split(",")):
        text = hostile_log(mib << 20, block=100_000)
        seconds = timed(lambda: classify(text, rules=rules))
        growth = f"  x{seconds / previous[1]:.1f} for x{mib / previous[0]:.0f} the size" if previous else ""
        print(f"   {mib:>3} MiB ({text.count(chr(10)):,} lines): {seconds:7.2f} s, {len(text) / seconds / 1e6:5.2f} MB/s{growth}")
        previous = (mib, seconds)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"   peak RSS {peak:.0f} MiB")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="2,8,32", help="MiB of hostile log, comma-separated")
    parser.add_argument("--paste", type=int, default=100_000, help="characters of each attack in part 1")
    parser.add_argument("--old-cap", type=float, default=10.0, help="seconds to let an old regex run")
    parser.add_argument("--skip-old", action="store_true", help="do not time the old regexes")
    parser.add_argument("--parts", default="1,2,3", help="which parts to run, comma-separated")
    parser.add_argument("--cost-mb", type=float, default=4.5, help="MB of each log in part 3")
    parser.add_argument("--seeds", type=int, default=4, help="fuzzed logs in part 3")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each log in part 3 (the fewest CPU seconds count)")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    rules = load_rules()
    classify("warm-up", rules=rules)
    print(f"$ {' '.join([Path(sys.executable).name] + sys.argv)}")
    if "1" in parts:
        attacks_pasted(rules, args)
    if "2" in parts:
        attacks_in_a_log(rules, args)
    if "3" in parts:
        cost_per_byte(rules, args.cost_mb, args.seeds, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
