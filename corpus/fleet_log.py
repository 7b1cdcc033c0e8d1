"""A fleet's log made of real corpus logs, for `stream` benchmarks and tests.

Whole healthy runs (corpus/clean/*.log) follow one another, and whole real failure logs
(corpus/cases/*.log) stand among them at even intervals; every line is a corpus line,
verbatim, nothing is invented. Written as one plain file (the jobs one after another) or
as Fluent Bit records (tail + docker parser + kubernetes filter, compact JSON as its http
and file outputs write them) of `pods` pods running their jobs side by side, their records
interleaved line by line.

    python -m corpus.fleet_log --mb 20 --envelope fluentbit --out /tmp/fleet.jsonl

Never commit a large output.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

CORPUS = Path(__file__).resolve().parent
ENVELOPES = ("plain", "fluentbit")
T0 = 1764709550.0  # 2025-12-02T21:05:50Z: the records' `date`, one millisecond a line


@dataclass(frozen=True)
class Job:
    name: str  # the corpus log it is, e.g. "clean/train-long-z2-dp2-fp32"
    lines: tuple[str, ...]
    failure: bool
    pod: str


def read_lines(path: Path) -> tuple[str, ...]:
    return tuple(path.read_text(encoding="utf-8", errors="replace").splitlines())


def clean_logs(only: str | None = None) -> list[tuple[str, tuple[str, ...]]]:
    paths = sorted((CORPUS / "clean").glob("*.log"))
    if only:
        paths = [p for p in paths if p.stem == only]
    return [(f"clean/{p.stem}", read_lines(p)) for p in paths]


def jobs(size: int, failures: list[tuple[str, tuple[str, ...]]], clean: list[tuple[str, tuple[str, ...]]],
         pods: int = 12) -> list[Job]:
    """Healthy jobs cycled until about `size` bytes of log text, with every failure log placed at
    an even interval among them; job i runs on pod i % pods."""
    healthy = sum(len(line) + 1 for _, lines in clean for line in lines) / len(clean)
    n_clean = max(int(size / healthy), len(failures) + 1)
    every = n_clean / (len(failures) + 1)
    out: list[Job] = []
    placed = 0
    for i in range(n_clean):
        while placed < len(failures) and i >= every * (placed + 1):
            name, lines = failures[placed]
            out.append(Job(name, lines, True, ""))
            placed += 1
        name, lines = clean[i % len(clean)]
        out.append(Job(name, lines, False, ""))
    return [Job(j.name, j.lines, j.failure, f"trainer-{i % pods}") for i, j in enumerate(out)]


def plain_lines(fleet: list[Job]) -> Iterator[str]:
    for job in fleet:
        yield from job.lines


def fluentbit_lines(fleet: list[Job]) -> Iterator[str]:
    """Each pod runs its jobs in turn; the pods' records are interleaved one line each."""
    queues: dict[str, list[Job]] = {}
    for job in fleet:
        queues.setdefault(job.pod, []).append(job)
    running = [(pod, iter([line for job in queue for line in job.lines])) for pod, queue in queues.items()]
    tick = 0
    while running:
        alive = []
        for pod, lines in running:
            line = next(lines, None)
            if line is None:
                continue
            alive.append((pod, lines))
            yield fluentbit_record(line, pod, tick)
            tick += 1
        running = alive


def fluentbit_record(line: str, pod: str, tick: int) -> str:
    return json.dumps({"date": round(T0 + tick / 1000, 3), "log": line + "\n", "stream": "stderr",
                       "kubernetes": {"pod_name": pod, "namespace_name": "ml-train", "container_name": "trainer",
                                      "host": "gpu-node-3"}}, separators=(",", ":"))


def write(path: Path, fleet: list[Job], envelope: str) -> tuple[int, int]:
    """Write the fleet's log; (bytes, lines)."""
    lines = plain_lines(fleet) if envelope == "plain" else fluentbit_lines(fleet)
    size = count = 0
    with open(path, "w", encoding="utf-8") as out:
        for line in lines:
            out.write(line)
            out.write("\n")
            size += len(line.encode("utf-8")) + 1
            count += 1
    return size, count


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m corpus.fleet_log", description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=20)
    parser.add_argument("--envelope", choices=ENVELOPES, default="plain")
    parser.add_argument("--pods", type=int, default=12)
    parser.add_argument("--bulk", metavar="CLEAN_LOG", help="replicate this one clean log (a stem) instead of all")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    failures = [(f"cases/{p.stem}", read_lines(p)) for p in sorted((CORPUS / "cases").glob("*.log"))[::10]]
    fleet = jobs(int(args.mb * 1e6), failures, clean_logs(args.bulk), args.pods)
    size, count = write(args.out, fleet, args.envelope)
    print(f"{args.out}: {size / 1e6:.1f} MB, {count:,} lines, {sum(j.failure for j in fleet)} failure logs")


if __name__ == "__main__":
    main()
