"""Turn raw log text into clean lines: no colours, no timestamps, no rank tags.

Each line keeps its 1-based number in the original text (evidence points at
it) and the rank its prefix named, so the same traceback printed by several
ranks can be collapsed later.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")

# Prefixes that wrap a line, tried repeatedly at the start of a line in any
# order; each regex must consume only the wrapper, never the message.
_TIMESTAMP = (
    r"\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?"
    r"(?: (?:stdout|stderr) [FP])?"  # CRI (Kubernetes) container log format
)
_GLOG = r"\[?[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+ +\d+ [^\]\s]+:\d+\]"  # torch's C++/elastic logs
_LEVEL = r"\[?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\]?:?"
_RANK = (
    r"\[(?:rank|default)(?P<r1>\d+)\]:?"  # torch workers, torchrun --tee/log prefix
    r"|\[(?P<r2>\d+),\d+\]<std(?:out|err)>:"  # Open MPI --tag-output
    r"|(?P<r3>\d{1,4}): "  # srun --label
    r"|(?:[\w.-]+-)?(?:worker|node)-?\d+: "  # pdsh (deepspeed launcher) host tags
    r"|\d{1,3}(?:\.\d{1,3}){3}: "  # pdsh with IP hosts
)
PREFIX = re.compile(rf"(?:(?P<tag>{_TIMESTAMP}|{_GLOG}|{_LEVEL})|{_RANK})[ \t]?")


@dataclass(frozen=True, slots=True)
class Line:
    no: int  # 1-based line number in the original text
    text: str  # normalized text (prefixes and colours removed, right-stripped)
    rank: int | None = None
    tagged: bool = False  # a timestamp or log-level prefix was removed: a log record
    labels: int = 0  # how many rank/host labels wrapped it: lines of one stream share the count


def normalize(text: str) -> list[Line]:
    lines: list[Line] = []
    has_escape = "\x1b" in text
    # Split on newlines only: str.splitlines() would also split on a bare \r,
    # and a bare \r is a progress bar redrawing its own line.
    raws = text.split("\n")
    if raws and raws[-1] == "":
        raws.pop()
    for no, raw in enumerate(raws, start=1):
        if has_escape:
            raw = ANSI.sub("", raw)
        if "\r" in raw:  # CRLF, or a redraw in place: keep what was shown last
            raw = raw.rstrip("\r").rsplit("\r", 1)[-1]
        text_, rank, tagged, labels = _strip(raw)
        lines.append(Line(no, text_.rstrip(), rank, tagged, labels))
    return lines


def strip_prefixes(raw: str) -> tuple[str, int | None, bool]:
    text, rank, tagged, _ = _strip(raw)
    return text, rank, tagged


def _strip(raw: str) -> tuple[str, int | None, bool, int]:
    rank = None
    tagged = False
    labels = 0
    pos = 0
    # A prefix can only start a line; stop at the first position none matches.
    while True:
        match = PREFIX.match(raw, pos)
        if not match or match.end() == pos:
            break
        number = match.group("r1") or match.group("r2") or match.group("r3")
        if number is not None:
            rank = int(number)  # the innermost label wins: srun's "0: [rank1]:" is torch rank 1
        tagged = tagged or match.group("tag") is not None
        labels += match.group("tag") is None
        pos = match.end()
    return raw[pos:], rank, tagged, labels
