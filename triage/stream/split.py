"""A large file read by several processes at once, with the answer one process would give.

The file is cut at line starts into shares, one per process: this process reads the first; a
forked child reads each other share in a few parts, every part from an empty state. Then,
part by part in input order, a child's part is taken when nothing one process would have
carried into it can change it:

* nothing is mid-incident or mid-line where the part begins (the child would have read the
  rest of an incident, or of a split line, as new lines), nor where it ends (the last aside);
* all the streams together fit `max_streams` (evictions follow the least-recent order);
* an incident's context, what its stream remembered before it opened: the child starts every
  stream with a stand-in for each context check, and a stand-in still there when an incident
  opens (no newer line replaced it, no run start or finished launch dropped it) is replaced
  here by the line this process's stream remembered for that check, if any.

A part that cannot be taken is read here, after the parts before it: the answer is always one
process's answer (the incidents and every count of the summary but `records`, the records
decoded: a child that starts a part knowing no stream decodes some lines one process skips),
at worst no sooner; cutting a share into parts makes an incident open at a
cut cost one part, not the share. The incidents are classified here, in input order. The
file is read up to the size it had when reading began (a log still being written is for a
pipe: `tail -f LOG | ds-triage stream`). `tests/test_stream_split.py` compares both on corpus
fleets cut at many points.
"""

from __future__ import annotations

import os
import pickle
import signal
import tempfile
import time
import traceback
import uuid
from dataclasses import dataclass

from triage.stream.assemble import Assembler, Window
from triage.stream.records import Decoder
from triage.stream.scan import Scanner

CHUNK = 4 << 20
MIN_SHARE = 32 << 20  # bytes: a smaller share is not worth a process (fork, merge: ~0.1 s)
PIECES = 4  # parts of each child's share


def parts(fd: int, size: int, jobs: int) -> list[int]:
    """Where each part starts: this process's share first, then each child's PIECES parts, all
    at the first line start at or after an even share of the file."""
    jobs = min(jobs, size // MIN_SHARE)
    if jobs < 2:
        return [0]
    starts = [0]
    for k in range(1, (jobs - 1) * PIECES + 1):
        at = _line_start(fd, size // jobs + (size - size // jobs) * (k - 1) // ((jobs - 1) * PIECES), size)
        if at is None:
            break
        if at > starts[-1]:
            starts.append(at)
    return starts


def _line_start(fd: int, at: int, size: int) -> int | None:
    at = max(at, 1)
    while at < size:
        data = os.pread(fd, 1 << 16, at - 1)
        newline = data.find(b"\n")
        if newline >= 0:
            return at + newline if at + newline < size else None
        at += len(data)
    return None


@dataclass
class _Part:
    """What a child read: where its incidents are in the child's spill file (closed, in order,
    numbered from its part's first line), its streams as it left them, and its counts."""

    windows: tuple[int, int]  # (offset, how many)
    streams: dict
    busy: bool
    evicted: int
    forgotten: int
    lines: int
    bytes: int
    cut_lines: int
    stats: dict


def pump_parts(fd: int, triage, starts: list[int], size: int, on_read=None, per_child: int = PIECES) -> int:
    """Read the file in the parts that begin at `starts`: the first here, the others by
    children, `per_child` consecutive parts each (see the module's text). Returns how many
    parts were taken from a child."""
    token = f"\0ds-triage part {uuid.uuid4().hex} "  # the stand-ins' text: never a log line's
    spans = list(zip(starts, starts[1:] + [size]))
    shares = [spans[i:i + per_child] for i in range(1, len(spans), per_child)]
    children = [_Child(fd, triage, share, token, share[-1][1] == size) for share in shares]
    taken = 0
    try:
        _read(fd, *spans[0], triage.feed, triage.tick, on_read)
        for child, share in zip(children, shares):
            results = child.results()
            for (start, end), part in zip(share, results or [None] * len(share)):
                if part is not None and _merge(triage, part, child.windows(part), token):
                    taken += 1
                    if on_read is not None:
                        on_read(end - start)
                else:
                    _read(fd, start, end, triage.feed, triage.tick, on_read)
    finally:
        for child in children:
            child.stop()
    triage.finish(time.monotonic())
    return taken


def _read(fd: int, start: int, end: int, feed, tick, on_read=None) -> None:
    at = start
    while at < end:
        data = os.pread(fd, min(CHUNK, end - at), at)
        if not data:
            break
        at += len(data)
        now = time.monotonic()
        feed(data, now)
        tick(now)
        if on_read is not None:
            on_read(len(data))


class _Child:
    """A forked process reading consecutive parts. Its incidents go to a spill file as they
    close (memory stays bounded as in one process), its _Parts back through a pipe."""

    def __init__(self, fd: int, triage, share: list[tuple[int, int]], token: str, last: bool):
        self._spill = tempfile.TemporaryFile()
        read_end, write_end = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: read, send, leave without the parent's exit handlers
            code = 1
            try:
                os.close(read_end)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                found = [_read_part(fd, triage, start, end, token, last and end == share[-1][1], self._spill)
                         for start, end in share]
                self._spill.flush()
                with os.fdopen(write_end, "wb") as out:
                    pickle.dump(found, out, pickle.HIGHEST_PROTOCOL)
                code = 0
            except BaseException:  # its parts are read by the parent instead
                if os.environ.get("DS_TRIAGE_DEBUG"):
                    traceback.print_exc()
            finally:
                os._exit(code)
        os.close(write_end)
        self._pipe: int | None = read_end
        self._done = False

    def results(self) -> list[_Part] | None:
        """The child's parts, or None when it failed (they are read here instead)."""
        with os.fdopen(self._pipe, "rb") as pipe:
            data = pipe.read()
        self._pipe = None
        _, status = os.waitpid(self.pid, 0)
        self._done = True
        return pickle.loads(data) if status == 0 and data else None

    def windows(self, part: _Part):
        """The part's incidents, read back from the spill file one at a time."""
        offset, count = part.windows
        self._spill.seek(offset)
        for _ in range(count):
            yield pickle.load(self._spill)

    def stop(self) -> None:
        if self._pipe is not None:
            os.close(self._pipe)
        if not self._done:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self.pid, 0)
            self._done = True
        self._spill.close()


def _read_part(fd: int, triage, start: int, end: int, token: str, last: bool, spill) -> _Part:
    """One part, read from an empty state whose streams begin with a stand-in per context check."""
    decoder = Decoder(triage.decoder.format, triage.decoder.message_fields, triage.decoder.key_fields)
    offset, count = spill.tell(), 0

    def spilled(window: Window) -> None:
        nonlocal count
        pickle.dump(window, spill, pickle.HIGHEST_PROTOCOL)
        count += 1

    assembler = Assembler(triage.prefilter, triage.assembler.limits, spilled)
    assembler.inherited = {check: (0, 0, f"{token}{check}") for check in range(len(triage.prefilter.context))}
    scanner = Scanner(decoder, triage.prefilter, assembler, decode_all=triage.scanner.decode_all)
    _read(fd, start, end, scanner.feed, assembler.tick)
    if last:
        scanner.finish(time.monotonic())
    return _Part((offset, count), dict(assembler.streams), assembler.busy, assembler.evicted, assembler.forgotten,
                 scanner.lines, scanner.bytes, scanner.cut_lines, decoder.stats)


def _merge(triage, part: _Part, windows, token: str) -> bool:
    """Take a child's part as if this process had read it, when nothing carried into the part
    can change it; False (and nothing changed) when something can."""
    assembler = triage.assembler
    if assembler.busy or part.busy:
        return False
    # one process would drop streams during the part (the child saw all it dropped, if any)
    if part.forgotten or len(assembler.streams.keys() | part.streams.keys()) > assembler.limits.max_streams:
        return False
    offset = triage.scanner.lines
    for window in windows:
        window.first_no += offset
        window.last_no += offset
        window.context = _context_lines(window.context, assembler.streams.get(window.key), token)
        triage.take_window(window)
    for key, state in part.streams.items():  # least recently seen first, as the child left them
        base = assembler.streams.get(key)
        state.context = {check: entry for check, entry in
                         ((check, _entry(entry, base, check, offset, token)) for check, entry in state.context.items())
                         if entry is not None}
        assembler.streams[key] = state
        assembler.streams.move_to_end(key)
    assembler.evicted += part.evicted
    triage.scanner.lines += part.lines
    triage.scanner.bytes += part.bytes
    triage.scanner.cut_lines += part.cut_lines
    for name, count in part.stats.items():
        triage.decoder.stats[name] += count
    return True


def _entry(entry: tuple, base, check: int, offset: int, token: str) -> tuple | None:
    """A remembered line of the child's stream, numbered in the whole file; a stand-in becomes
    what this process's stream remembered for the check, or nothing."""
    no, seq, text = entry
    if no == 0 and text.startswith(token):
        return base.context.get(check) if base is not None else None
    return no + offset, seq, text


def _context_lines(lines: list[str], base, token: str) -> list[str]:
    """An incident's context lines with its stand-ins replaced (they sort first: line 0)."""
    stand_ins = [int(line[len(token):]) for line in lines if line.startswith(token)]
    if not stand_ins:
        return lines
    inherited = sorted(base.context[c] for c in stand_ins if c in base.context) if base is not None else []
    return [text for _, _, text in inherited] + [line for line in lines if not line.startswith(token)]
