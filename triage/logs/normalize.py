"""Turn raw log text into clean lines: no colours, no timestamps, no rank tags, no hard wraps.

Each line keeps its 1-based number in the original text (evidence points at
it) and the rank its prefix named, so the same traceback printed by several
ranks can be collapsed later.
"""

from __future__ import annotations

import re

from triage.record import Frozen

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")

# Prefixes that wrap a line, tried repeatedly at the start of a line in any
# order; each regex must consume only the wrapper, never the message. The
# other loggers' headers use bounded quantifiers only, none inside another.
_LEVELS = r"DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL"
_TIMESTAMP = (
    r"\[?(?:\d{4}-\d{2}-\d{2}[T ]|\d{2}/\d{2}/\d{4} )\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?"
    r"(?: (?:stdout|stderr) [FP])?"  # CRI (Kubernetes) container log format
)
_GLOG = r"\[?[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+ +\d+ [^\]\s]+:\d+\]"  # torch's C++/elastic logs
_LEVEL = r"\[?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\]?:?"
# Other loggers' record headers, as each library formats them:
_RECORDS = (
    # transformers' explicit format: "[%(levelname)s|%(filename)s:%(lineno)s] %(asctime)s >> "
    rf"\[(?:{_LEVELS})\|[^\]|\s]{{1,200}}:\d{{1,7}}\] \d{{4}}-\d{{2}}-\d{{2}} \d{{2}}:\d{{2}}:\d{{2}}(?:,\d{{1,6}})? >>"
    # loguru's default, after its timestamp: "| {level: <8} | {name}:{function}:{line} - "
    r"|\| \w{1,20} {1,13}\| [^\s:|]{1,200}:[^\s:|]{1,200}:\d{1,7} -"
    # Python logging's "%(asctime)s - %(levelname)s - %(name)s - " (the transformers examples), after its timestamp
    rf"|- (?:{_LEVELS}) - [^\s]{{1,200}} -"
)
_RANK = (
    r"\[(?:rank|default)(?P<r1>\d+)\]:?"  # torch workers, torchrun --tee/log prefix
    r"|\[(?P<r2>\d+),\d+\]<std(?:out|err)>:"  # Open MPI --tag-output
    r"|(?P<r3>\d{1,4}): "  # srun --label
    r"|(?:[\w.-]+-)?(?:worker|node)-?\d+: "  # pdsh (deepspeed launcher) host tags
    r"|\d{1,3}(?:\.\d{1,3}){3}: "  # pdsh with IP hosts
    # Ray's driver, for each worker's line: "(ActorOrTask pid=123, ip=10.0.0.1) ", "(raylet) "
    r"|\((?:[^\s()]{1,200} )?pid=\d{1,10}(?:, ip=[0-9A-Fa-f.:]{2,64})?\)"
    r"|\((?:raylet|autoscaler|gcs_server)(?:, ip=[0-9A-Fa-f.:]{2,64}| \+[\dhms]{2,16})?\)"
)
# _RECORDS first: "[INFO|trainer.py:12]" must not lose only its "[INFO" to _LEVEL.
PREFIX = re.compile(rf"(?:(?P<tag>{_RECORDS}|{_TIMESTAMP}|{_GLOG}|{_LEVEL})|{_RANK}) ?")  # a space after the prefix; a tab there is the line's own (a message's indented line)
# Full-width forms of ASCII (a translated IDE or console prints `ValueError：`), and the
# ideographic space: their ASCII, so the traceback parses and rules match.
_FULL_WIDTH = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}
# The forms a translated traceback shows most (its colon, its comma): a substring test each
# tells a text that needs translating; a regex class over a 5,000-line log costs 10 ms.
_FULL_WIDTH_MARKS = ("\uff1a", "\uff0c")
# A text hard-wrapped at a fixed width (wrap_width): narrower is a text of short lines, not a
# wrap; fewer full lines could be a log's few longest lines being alike.
WRAP_MIN_WIDTH = 40
WRAP_LINES = 3
SAME_START = 8  # a line that starts as the full line above it does is a line of the same kind, not its rest
# Ray's log deduplication appends this to a line it has folded.
_RAY_REPEATED = re.compile(r" ?\[repeated \d{1,9}x across cluster\]$")


class Line(Frozen):
    __slots__ = _fields = ("no", "text", "rank", "tagged", "labels", "joined")

    def __init__(self, no: int, text: str, rank: int | None = None, tagged: bool = False, labels: int = 0,
                 joined: bool = False):
        self.no = no  # 1-based line number in the original text
        self.text = text  # normalized text (prefixes and colours removed, right-stripped)
        self.rank = rank
        self.tagged = tagged  # a timestamp or log-level prefix was removed: a log record
        self.labels = labels  # how many rank/host labels wrapped it: lines of one stream share the count
        self.joined = joined  # the rest of a line hard-wrapped at a fixed width: its text went to the line it continues


def normalize(text: str, cuts: tuple = ()) -> list[Line]:
    """The log's lines, cleaned of prefixes and colours; `cuts` (triage.logs.inputs.LogText.cuts):
    where lines were left out of a big log, so each Line.no is its number in the whole log."""
    has_escape = "\x1b" in text
    ray_dedup = "x across cluster]" in text
    # str.translate goes character by character: only for a text that holds a full-width form
    full_width = not text.isascii() and any(mark in text for mark in _FULL_WIDTH_MARKS)
    # Split on newlines only: str.splitlines() would also split on a bare \r,
    # and a bare \r is a progress bar redrawing its own line.
    raws = text.split("\n")
    if raws and raws[-1] == "":
        raws.pop()
    if has_escape or full_width or "\r" in text:
        raws = [_clean(raw, has_escape, full_width) for raw in raws]
    width = wrap_width(raws)
    joined = _unwrap(raws, width) if width else []
    # Only the lines a prefix starts go through _strip (a second regex to find them in the
    # whole text would save less than compiling it costs a cold start).
    match = PREFIX.match
    prefixed = [index for index, raw in enumerate(raws) if match(raw)]
    # Most lines carry no prefix: their Line straight from the raw text, without _strip.
    if ray_dedup:
        lines = [Line(no, _RAY_REPEATED.sub("", raw.rstrip()).rstrip()) for no, raw in enumerate(raws, start=1)]
    else:
        lines = [Line(no, raw.rstrip()) for no, raw in enumerate(raws, start=1)]
    outer_only: list[int] = []  # lines whose rank only an outer label (srun, Open MPI) gave
    inner = False  # some line carries torch's own [rankN] tag
    for index in prefixed:
        text_, rank, tagged, labels, torch_tag = _strip(raws[index])
        raws[index] = ""  # the line's text is now text_: a 32 MiB log is held once, not twice
        if rank is None and not tagged and not labels:
            continue  # no prefix: the line built above
        if ray_dedup:
            text_ = _RAY_REPEATED.sub("", text_.rstrip())
        inner = inner or torch_tag
        if rank is not None and not torch_tag:
            outer_only.append(index)
        lines[index] = Line(index + 1, text_.rstrip(), rank, tagged, labels)
    if inner:
        # srun --label in front of torchrun names the srun task (a node), not a rank: where
        # torch tags its ranks' lines itself, the lines it does not tag (the launcher's) have none.
        for i in outer_only:
            lines[i] = lines[i].replace(rank=None)
    for i in joined:
        lines[i] = Line(i + 1, "", joined=True)
    if cuts:
        from triage.logs.inputs import real_line

        lines = [line.replace(no=real_line(line.no, cuts)) for line in lines]
    return lines


def wrap_width(raws: list[str]) -> int:
    """The width a text was hard-wrapped at (a terminal's copy, a ticket's 80 columns), or 0: the
    length of its longest lines, when no line is longer and at least WRAP_LINES different lines of
    that length were cut there (`_cut`)."""
    lengths = list(map(len, raws))
    width = max(lengths, default=0)
    if width < WRAP_MIN_WIDTH or lengths.count(width) < WRAP_LINES:
        return 0  # the common case, in C: a log's longest lines are few
    cut, i = set(), -1
    for _ in range(lengths.count(width)):  # list.index walks to each full line in C
        i = lengths.index(width, i + 1)
        if _cut(raws, i, width):
            cut.add(raws[i])
    return width if len(cut) >= WRAP_LINES else 0


def _cut(raws: list[str], i: int, width: int) -> bool:
    """Line i is a piece cut at `width` and the next line its rest: not a line of its own that
    happens to be as long, which the next one, built alike, starts like (`\tsize mismatch for`)."""
    if len(raws[i]) != width or i + 1 == len(raws):
        return False
    rest = raws[i + 1]
    return bool(rest) and rest[:SAME_START] != raws[i][:SAME_START]


def _unwrap(raws: list[str], width: int) -> list[int]:
    """Join each wrapped line's pieces into its first line, in place; the indexes of the rest."""
    joined = []
    i = 0
    while i < len(raws):
        j = i
        while _cut(raws, j, width):
            j += 1
        if j > i:
            raws[i] = "".join(raws[i:j + 1])
            joined.extend(range(i + 1, j + 1))
            for k in range(i + 1, j + 1):
                raws[k] = ""
        i = j + 1
    return joined


def _clean(raw: str, has_escape: bool, full_width: bool) -> str:
    if has_escape:
        raw = ANSI.sub("", raw)
    if "\r" in raw:  # CRLF, or a redraw in place: keep what was shown last
        raw = raw.rstrip("\r").rsplit("\r", 1)[-1]
    if full_width:
        raw = raw.translate(_FULL_WIDTH)
    return raw


def strip_prefixes(raw: str) -> tuple[str, int | None, bool]:
    text, rank, tagged, _, _ = _strip(raw)
    return text, rank, tagged


def _strip(raw: str) -> tuple[str, int | None, bool, int, bool]:
    rank = None
    tagged = False
    torch_tag = False
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
            torch_tag = match.group("r1") is not None
            if torch_tag:
                # a timestamp outside torch's rank tag is a collector's, on every line of that rank's
                # stream (a message's unindented lines too): a record of the rank is tagged inside it
                tagged = False
        tagged = tagged or match.group("tag") is not None
        labels += match.group("tag") is None
        pos = match.end()
    return raw[pos:], rank, tagged, labels, torch_tag
