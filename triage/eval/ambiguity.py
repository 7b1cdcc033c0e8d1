"""Logs that are the same text for different causes: the top-1 ceiling of any log-only classifier.

Two runs with different root causes can print exactly the same thing (a ZeRO-3 checkpoint loaded
with a stage-2 config and a deleted mp_rank_00_model_states.pt both end in the bare
check_ckpt_list assertion). Whatever a classifier answers for that text, it is wrong for one of
them. `fingerprint` reduces a log to what does not change between two runs of the same thing
(the case's own id, process ids, addresses, timings, the line numbers and install paths of
frames, which move between releases and machines, and the launcher's process bookkeeping
removed; lines sorted, because ranks interleave at random); `ceiling` counts, for each group of
labelled cases with the same fingerprint, only the most common label as reachable.

This is a bound from exact sameness only: logs that differ in a line that carries no
information about the cause (a different world size, say) still count as different, so the
real ceiling can be lower.
"""

from __future__ import annotations

import re
from collections import Counter

from triage.logs.normalize import normalize

_VOLATILE = (
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),  # object addresses in DeepSpeed's config dump
    (re.compile(r"\b(pid:? ?|PID |process )\d+"), r"\1?"),
    (re.compile(r"\b\d+(?:\.\d+)?(?:e-?\d+)? ?(?:s|ms|sec|secs|seconds)\b"), "? s"),
    (re.compile(r"(?<![\w.])[\w.]+\.py:\d+"), "?.py:?"),  # logger call sites move between releases
    (re.compile(r'(File "[^"\n]{0,500}\.py", line )\d+'), r"\1?"),  # so do a traceback's frames
    (re.compile(r'File "[^"\n]{0,500}/(?:site|dist)-packages/'), 'File "?/'),  # where the venv is
    (re.compile(r'File "/[^"\n]{0,500}/'), 'File "?/'),  # where the job's own script was checked out
)
# torchrun's bookkeeping of which process died first and how: a race between ranks, not the fault
_LAUNCHER = re.compile(
    r"closing signal|^\s*(exitcode|traceback|time|host|rank|error_file|local_rank)\s+:|failed \(exitcode|"
    r"Root Cause|^Failures:|<NO_OTHER_FAILURES>|^\s*\[\d+\]:$|^[=-]{10,}$|^\s*$|"
    r"built successfully|Using \S+ as PyTorch extensions root")


def fingerprint(text: str, case_id: str = "") -> tuple[str, ...]:
    # a case run on an older release (`name@ds0.14.5-torch2.5.1`) wrote under its name alone
    names = [n for n in dict.fromkeys((case_id, case_id.split("@")[0])) if n]
    lines = []
    for line in normalize(text):
        t = line.text
        for name in names:
            t = t.replace(name, "<case>")
        for pattern, replacement in _VOLATILE:
            t = pattern.sub(replacement, t)
        if not _LAUNCHER.search(t):
            lines.append(t)
    return tuple(sorted(lines))


def same_log_groups(labelled: list[tuple[str, str, tuple[str, ...]]]) -> list[list[tuple[str, str]]]:
    """Groups of (case id, expected category) whose fingerprints are equal and whose labels differ."""
    by_print: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    for case_id, category, printed in labelled:
        by_print.setdefault(printed, []).append((case_id, category))
    return [group for group in by_print.values() if len({c for _, c in group}) > 1]


def unreachable(groups: list[list[tuple[str, str]]]) -> int:
    """Cases no log-only classifier can get right: in each group all but the most common label."""
    return sum(len(group) - Counter(c for _, c in group).most_common(1)[0][1] for group in groups)
