#!/usr/bin/env python3
"""Speed of classify on logs built to make regexes slow (issue 16, "Linear-time matching").

    .venv/bin/python benchmarks/bench_hostile_logs.py [--sizes 2,8,32] [--old-cap 10] [--paste 100000]

1. Each attack of tests/hostile/logs.py in a 100 KB paste: the regex it was built against, as
   it was before it was rewritten (capped at --old-cap seconds), beside `classify` of the
   paste today (and the probe's log reading for target.LOG_WORLD).
2. A real log with every attack in its middle, at each of --sizes MiB: classify's wall time
   and MB/s, and the ratio to the smaller size before it (linear: the size ratio).

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

from tests.hostile.logs import ATTACKS, hostile_log, old_run, paste  # noqa: E402
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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="2,8,32", help="MiB of hostile log, comma-separated")
    parser.add_argument("--paste", type=int, default=100_000, help="characters of each attack in part 1")
    parser.add_argument("--old-cap", type=float, default=10.0, help="seconds to let an old regex run")
    parser.add_argument("--skip-old", action="store_true", help="do not time the old regexes")
    args = parser.parse_args()
    rules = load_rules()
    classify("warm-up", rules=rules)
    print(f"$ {' '.join([Path(sys.executable).name] + sys.argv)}")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
