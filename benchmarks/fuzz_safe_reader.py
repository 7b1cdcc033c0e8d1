#!/usr/bin/env python3
"""A long fuzz run of the safe reader and of the log parser (issue 16).

    PYTHONPATH=. .venv/bin/python benchmarks/fuzz_safe_reader.py [--examples 20000] [--seed N]

The same properties and strategies as tests/test_fuzz_safe_reader.py (which runs a few hundred
examples in the suite), with many more examples: generated pickle opcode streams and real shards'
pickles mutated, each written as a shard's data.pkl and read with `read_shard` (it must return a
verdict, never raise, never call a global, never change the shared stand-ins); generated log text
through `triage.logs.parse.parse`. Prints, per target, examples run, examples/s, the verdicts
(read / unreadable / over a cap / suspicious global) and the first failure, if any. Exit 1 on one.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
import traceback
from pathlib import Path

from hypothesis import HealthCheck, given, seed, settings

from tests import test_fuzz_safe_reader as target
from tests.hostile import pickles as hp


def run(name: str, strategy, check, examples: int, fixed_seed: int | None) -> bool:
    verdicts: collections.Counter = collections.Counter()

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def prop(value):
        verdicts[check(value)] += 1

    if fixed_seed is not None:
        prop = seed(fixed_seed)(prop)
    start = time.perf_counter()
    failure = None
    try:
        prop()
    except Exception:  # the property failed: hypothesis has shrunk it; show it
        failure = traceback.format_exc(limit=6)
    seconds = time.perf_counter() - start
    total = sum(verdicts.values())
    print(f"{name}: {total} examples in {seconds:.1f} s, {total / seconds:.0f} examples/s; "
          + ", ".join(f"{k} {v}" for k, v in verdicts.most_common()), flush=True)
    if failure:
        print(f"{name}: FAILED\n{failure}", flush=True)
    return failure is None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--examples", type=int, default=20000, help="examples per target")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    print(f"command: {' '.join([Path(sys.executable).name] + sys.argv)}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        shard, marker = Path(tmp, "shard.pt"), Path(tmp, "ran")

        def reader(data: bytes) -> str:
            meta = target.check_reader(data, shard, marker)
            return ("over a cap" if meta.over_cap else "unreadable" if meta.error
                    else "suspicious global" if meta.suspicious else "read")

        def log(text: str) -> str:
            incident, lines = target.parse(text)
            assert incident.line_count == len(lines)
            return "parsed with chains" if incident.chains else "parsed"

        ok = run("safe reader, opcode streams", hp.opcode_streams(str(marker)), reader, args.examples, args.seed)
        ok &= run("safe reader, mutated real pickles", hp.mutated(target.real_pickles()), reader,
                  args.examples, args.seed)
        ok &= run("log parser, generated text", hp.log_texts(), log, args.examples, args.seed)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
