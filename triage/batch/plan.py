"""What the driver makes of the first pass: the totals, and which streams go to the second.

Plain Python (no pyspark), as the executors' side is (tasks.py).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Facts:
    """What the first pass tells the driver."""

    files: dict = field(default_factory=dict)  # path -> (bytes, lines, may hold records naming a stream)
    binary: dict = field(default_factory=dict)  # path -> why it was skipped
    candidates: dict = field(default_factory=dict)  # stream key -> [(name, value, literal)]
    seen: set = field(default_factory=set)  # the streams records named, as far as the pass decoded them
    incidents: list = field(default_factory=list)  # (category, job, day) of each incident
    stats: dict = field(default_factory=dict)


def gather(items) -> Facts:
    """The first pass's items other than incidents (files.scan_file, tasks.first_pass) -> Facts."""
    facts = Facts()
    for item in items:
        kind = item[0]
        if kind == "file":
            facts.files[item[1]] = item[2:]
        elif kind == "binary":
            facts.binary[item[1]] = item[2]
        elif kind == "candidate":
            options = facts.candidates.setdefault(item[1], [])
            options.extend(o for o in item[2] if o not in options)
        elif kind == "seen":
            facts.seen.add(item[1])
        elif kind == "stats":
            for name, value in item[1].items():
                facts.stats[name] = facts.stats.get(name, 0) + value
    facts.seen.update(facts.candidates)
    return facts


def choose_literal(options: list[tuple[str, str, bytes]], shared_by: Counter) -> bytes | None:
    """The literal a stream's lines are found by: of its key's values, the one fewest other
    streams share (the pod name, not the namespace), then the longest."""
    if not options:
        return None
    return min(options, key=lambda o: (shared_by[(o[0], o[1])], -len(o[2]), o[2]))[2]


def second_pass(facts: Facts) -> tuple[list, list, dict, list] | None:
    """(candidate keys, their literals, each file's place in input order, the files that may
    hold their lines); None when no stream that records name may open an incident."""
    if not facts.candidates:
        return None
    keys = sorted(facts.candidates)
    shared_by = Counter(pair for key in facts.seen for pair in key)  # (name, value) -> streams holding it
    literals = [choose_literal(facts.candidates[key], shared_by) for key in keys]
    order = {path: n for n, path in enumerate(sorted(facts.files))}
    named = sorted(path for path, (_, _, may) in facts.files.items() if may)
    return keys, literals, order, named
