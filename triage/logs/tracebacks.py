"""Parse Python tracebacks out of normalized log lines.

Ranks that share one stream are parsed separately (their lines interleave),
chained exceptions are linked, and the same chain printed by several ranks is
collapsed into one with the list of ranks.
"""

from __future__ import annotations

import re

from triage.logs.incident import Chain, Frame, RaisedException
from triage.logs.normalize import Line

TRACEBACK = "Traceback (most recent call last):"
CHAIN_LINKS = {
    "The above exception was the direct cause of the following exception:": "cause",
    "During handling of the above exception, another exception occurred:": "context",
}
FRAME = re.compile(r'\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')
# The line that ends a traceback: a dotted name, then ": message" or nothing. The name is the
# whole run of name characters (a colon or the end must follow it), so it is read in one
# pass; it names an exception when its last part has a capital past the first character
# (ValueError, torch.OutOfMemoryError, KeyboardInterrupt, SystemExit, _pickle.UnpicklingError).
# The same test as one regex, `[\w.]*(?:Error|...|[A-Z]\w*)`, is quadratic on a long name.
EXCEPTION = re.compile(r"(?P<type>[A-Za-z_][\w.]*)(?::[ ]?(?P<msg>.*))?$")
_NAMES_EXCEPTION = re.compile(r"[A-Z]\w*")


def exception_header(text: str) -> re.Match | None:
    """The match of an exception line (`type`, `msg`), or None."""
    header = EXCEPTION.match(text)
    if header is None:
        return None
    name = header["type"]
    last = name.rfind(".") + 1 or 1  # the last part; a bare name's first character does not count
    return header if _NAMES_EXCEPTION.search(name, last) else None
_NOISE = re.compile(r"\s*(?:[~^]+\s*|\.\.\.<\d+ lines>\.\.\.|\[Previous line repeated \d+ more times?\])$")
MAX_MESSAGE_LINES = 200
MAX_FRAMES = 500



def parse_chains(lines: list[Line]) -> list[Chain]:
    by_rank: dict[int | None, list[Line]] = {}
    for line in lines:
        by_rank.setdefault(line.rank, []).append(line)
    chains: list[Chain] = []
    for rank, group in by_rank.items():
        for chain in _parse_group(group):
            if rank is not None:
                chain.ranks = [rank]
            chains.append(chain)
    if not chains:
        chains = _bare_exceptions(lines)
    for chain in chains:
        # Python prints at least one frame: a header over none is a paste that dropped them all,
        # and shows no more of where the error was raised than the last line alone.
        chain.bare = chain.bare or not any(exc.frames for exc in chain.exceptions)
    chains.sort(key=lambda c: c.exceptions[0].frames[0].log_line if c.exceptions[0].frames else c.final.log_line)
    return collapse(chains)


# A paste of just the last line ("AssertionError: ...") still names the exception.
_BARE = re.compile(r"(?P<type>(?:[a-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception))(?:: (?P<msg>.*))?$")


def _bare_exceptions(lines: list[Line]) -> list[Chain]:
    """Exceptions from a log that holds no whole traceback: the last line alone, or the last
    lines of a traceback whose `Traceback (most recent call last):` header was cut off, with
    the frames shown above the exception."""
    # Collapsed as they are read, in the order parse_chains sorts them in (each after the one
    # before): 100,000 copies of one line cost one chain, not 100,000 held until the end.
    chains: dict[tuple, Chain] = {}
    # A substring test first: _BARE needs one of its two words, which most lines lack.
    # (Indexes only: a match holds its text, a copy when strip() had white space to take.)
    headers = [i for i, line in enumerate(lines)
               if ("Error" in line.text or "Exception" in line.text) and _BARE.match(line.text.strip())]
    # Each line is read for one exception at most: frames above an exception stop at the one
    # before it, its message at the one after it. Consecutive exception lines (a paste of
    # several, or one line repeated 100,000 times) are exceptions of their own, not one
    # message each of the next MAX_MESSAGE_LINES lines: that cost memory per line, not per byte.
    for k, i in enumerate(headers):
        line = lines[i]
        above = headers[k - 1] + 1 if k else 0
        end = headers[k + 1] if k + 1 < len(headers) else len(lines)
        start = _cut_frames_start(lines, i, above)
        exc = _parse_traceback(lines, start, end)[0] if start < i else None
        if exc is None or exc.log_line != line.no:
            exc, _ = _read_message(lines, i, _BARE.match(line.text.strip()), [], end)
        exc.cut = True
        _merge(chains, Chain([exc], [line.rank] if line.rank is not None else [], bare=not exc.frames))
    return list(chains.values())


def _cut_frames_start(lines: list[Line], i: int, above: int = 0) -> int:
    """Index of the first line of the frames right above line i (i when there are none): frame
    headers and the indented code and ^^^ lines under them, up to MAX_FRAMES * 4 lines, none
    before index `above`."""
    j = i
    while j > above and i - j < MAX_FRAMES * 4:
        text = lines[j - 1].text
        if not (FRAME.match(text) or (text[:1] in " \t" and text.strip()) or lines[j - 1].joined):
            break
        j -= 1
    while j < i and not FRAME.match(lines[j].text):
        j += 1  # code lines above the first frame header belong to a frame cut off above
    return j


def collapse(chains: list[Chain]) -> list[Chain]:
    merged: dict[tuple, Chain] = {}
    for chain in chains:
        _merge(merged, chain)
    return list(merged.values())


def _merge(merged: dict[tuple, Chain], chain: Chain) -> None:
    """Add `chain` to `merged` (by key), or count it as one more copy of the chain already there."""
    key = chain.key()
    if key in merged:
        kept = merged[key]
        kept.copies += 1
        kept.ranks = sorted(set(kept.ranks) | set(chain.ranks))
    else:
        merged[key] = chain


# concurrent.futures wraps a worker's traceback in triple quotes (_RemoteTraceback).
_QUOTES = '"""'


def _parse_group(lines: list[Line]) -> list[Chain]:
    chains: list[Chain] = []
    current: list[RaisedException] = []
    i = 0
    n = len(lines)
    while i < n:
        text = lines[i].text.strip()
        if text == TRACEBACK:
            exc, i = _parse_traceback(lines, i + 1)
            if exc is not None:
                current.append(exc)
            continue
        link = CHAIN_LINKS.get(text)
        if link and current:
            current[-1].link = link
            i += 1
            continue
        if current and text and text != _QUOTES and not text.startswith(TRACEBACK):
            # Anything else ends the chain (blank lines may stand between links).
            if current[-1].link is None:
                chains.append(Chain(current))
                current = []
        i += 1
    if current:
        chains.append(Chain(current))
    return chains


def _parse_traceback(lines: list[Line], i: int, n: int | None = None) -> tuple[RaisedException | None, int]:
    """The exception whose frames start at line i (none: (None, where it stopped)), read no
    further than line n."""
    frames: list[Frame] = []
    n = len(lines) if n is None else n
    while i < n:
        line = lines[i]
        match = FRAME.match(line.text)
        if match:
            code = None
            j = i + 1
            while j < n and lines[j].text.startswith((" ", "\t")) and not FRAME.match(lines[j].text):
                if code is None and not _NOISE.match(lines[j].text):
                    code = lines[j].text.strip()
                j += 1
            if len(frames) < MAX_FRAMES:
                frames.append(Frame(match["file"].replace("\\", "/"), int(match["line"]),
                                    match["func"].strip(), code, line.no))
            i = j
            continue
        if not line.text.strip() or _NOISE.match(line.text):
            i += 1
            continue
        header = exception_header(line.text)
        if header is None:
            return None, i  # not a traceback after all (or cut off): leave it to the caller
        exc, i = _read_message(lines, i, header, frames, n)
        exc.cut = not frames  # Python prints at least one frame: a paste dropped them
        return exc, i
    return None, i


def _read_message(lines: list[Line], i: int, header: re.Match, frames: list[Frame], end: int | None = None):
    """The exception of line i's header, its message continued over the lines after it (at most
    MAX_MESSAGE_LINES, none from line `end` on); and the index of the line after the message."""
    parts = [header["msg"] or ""]
    start = lines[i]
    end = len(lines) if end is None else end
    i += 1
    while i < end and len(parts) < MAX_MESSAGE_LINES:
        line = lines[i]
        text = line.text
        if line.joined:
            i += 1  # the rest of a wrapped line, already in the one it continues
            continue
        if not text.strip() or text.strip() in CHAIN_LINKS or text.strip() == TRACEBACK or text.strip() == _QUOTES:
            break
        if line.labels != start.labels:
            break  # another stream (a line no rank label wraps) is not this message
        if line.tagged and not (start.tagged and text[:1] in " \t"):
            # A new log record ends the message, unless a log pipeline tagged every
            # line: then an indented line (torch's "\tsize mismatch ...") continues it.
            break
        if FRAME.match(text):
            break
        parts.append(text)
        i += 1
    message = "\n".join(parts).strip()
    return RaisedException(header["type"], message, frames, start.no), i
