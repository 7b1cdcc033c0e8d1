"""Make an arbitrarily long log of healthy DeepSpeed training chatter (for false-positive and
performance tests of the classifier) by replaying a REAL clean log's per-step section with
shifted step numbers, jittered losses and advancing timestamps.

    python -m corpus.clean_chatter --lines 200000 --out /tmp/chatter.log
    python -m corpus.clean_chatter --source corpus/clean/train-long-z2-dp2-fp32.log --lines 5000

Output is synthetic (a re-arrangement of real lines); never commit a large one.
"""
import argparse
import datetime as dt
import random
import re
import sys
from pathlib import Path

DEFAULT_SOURCE = Path(__file__).resolve().parent / "clean" / "train-long-z2-dp2-fp32.log"
STEP_LINE = re.compile(r"step=\d+, skipped=|global_step=\d+|\] step \d+ loss |^steps: \d+ loss: ")
TS = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]")
TS_FMT = "%Y-%m-%d %H:%M:%S"
STEP_NUMS = re.compile(r"(step=|global_step=|micro_step=|global_step|\] step |^steps: )(\d+)")
LOSSES = re.compile(r"(loss:? )(\d+\.\d+)")


def split(lines):
    idx = [i for i, ln in enumerate(lines) if STEP_LINE.search(ln)]
    if not idx:
        raise SystemExit("source log has no training-step lines")
    return lines[:idx[0]], lines[idx[0]:idx[-1] + 1], lines[idx[-1] + 1:]


def timestamps(lines):
    out = []
    for ln in lines:
        m = TS.match(ln)
        if m:
            out.append(dt.datetime.strptime(m.group(1), TS_FMT) + dt.timedelta(milliseconds=int(m.group(2))))
    return out


def shift(line, step_off, time_off, rng):
    line = STEP_NUMS.sub(lambda m: f"{m.group(1)}{int(m.group(2)) + step_off}", line)
    line = LOSSES.sub(lambda m: f"{m.group(1)}{float(m.group(2)) * rng.uniform(0.97, 1.03):.4f}", line)
    m = TS.match(line)
    if m and time_off:
        t = dt.datetime.strptime(m.group(1), TS_FMT) + dt.timedelta(milliseconds=int(m.group(2))) + time_off
        line = f"[{t.strftime(TS_FMT)},{t.microsecond // 1000:03d}]" + line[m.end():]
    return line


def generate(source, n_lines, seed=0):
    lines = Path(source).read_text(errors="replace").splitlines()
    head, body, tail = split(lines)
    steps = [int(m.group(2)) for ln in body for m in [re.search(r"(step=)(\d+), skipped", ln)] if m]
    period = (max(steps) - min(steps) + 1) if steps else 1
    ts = timestamps(body)
    span = (ts[-1] - ts[0] + dt.timedelta(milliseconds=20)) if len(ts) > 1 else dt.timedelta(seconds=1)
    rng = random.Random(seed)
    yield from head
    emitted, cycle = len(head), 0
    while emitted + len(tail) < n_lines:
        for ln in body:
            yield shift(ln, cycle * period, cycle * span, rng)
            emitted += 1
        cycle += 1
    for ln in tail:
        yield shift(ln, (cycle - 1) * period, (cycle - 1) * span, rng)


def main():
    p = argparse.ArgumentParser(prog="python -m corpus.clean_chatter", description=__doc__.splitlines()[0])
    p.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="a real clean log to replay")
    p.add_argument("--lines", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="output file (default: stdout)")
    args = p.parse_args()
    out = open(args.out, "w") if args.out else sys.stdout
    for ln in generate(args.source, args.lines, args.seed):
        out.write(ln + "\n")
    if args.out:
        out.close()


if __name__ == "__main__":
    main()
