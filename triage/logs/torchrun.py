"""Read the launchers' failure summaries: which rank failed first, exit codes.

torchrun prints a box after `ChildFailedError`:

    Root Cause (first observed failure):
    [0]:
      ...
      rank      : 1 (local_rank: 1)
      exitcode  : -9 (pid: 4242)

and the deepspeed launcher prints `exits with return code = -9`.
"""

from __future__ import annotations

import re

from triage.logs.normalize import Line

_ROOT = "Root Cause (first observed failure):"
_RANK = re.compile(r"\s*rank\s*:\s*(\d+)")
_EXIT = re.compile(r"\s*exitcode\s*:\s*(-?\d+)")
_LAUNCHER_EXIT = re.compile(r"exits with return code = (-?\d+)")


def parse_summary(lines: list[Line]) -> tuple[int | None, dict[int, int]]:
    """Return (root-cause rank, {rank: exit code}) from every summary box."""
    root: int | None = None
    exit_codes: dict[int, int] = {}
    in_root = False
    rank: int | None = None
    for line in lines:
        text = line.text
        if "rank" not in text and "exit" not in text and "Root Cause" not in text:
            continue  # most of a log: skip the regexes
        if text.strip() == _ROOT:
            in_root = True
            continue
        match = _RANK.match(text)
        if match:
            rank = int(match.group(1))
            if in_root and root is None:
                root = rank
            continue
        match = _EXIT.match(text)
        if match and rank is not None:
            exit_codes[rank] = int(match.group(1))
            in_root = False
            rank = None
            continue
        match = _LAUNCHER_EXIT.search(text)
        if match:
            exit_codes.setdefault(-1, int(match.group(1)))  # -1: the launcher, rank unknown
    return root, exit_codes
