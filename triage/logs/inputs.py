"""Read a log safely: any bytes in, text out, or a clear BadInput.

A log over MAX_BYTES keeps its head and tail, and memory stays bounded by the cap: a file is
read by seeking to both ends, a pipe or a gzip stream through a rolling tail buffer. A `.gz`
log (gzip magic, whatever the name) is decompressed as it is read.
"""

from __future__ import annotations

import io
import json
import os
import stat
import sys

from triage.errors import BadInput
from triage.record import Frozen

# A whole multi-rank job log is a few MB; past this we keep the head and the
# tail, where tracebacks and torchrun's summary live, and say so.
MAX_BYTES = 32 * 1024 * 1024
HEAD_BYTES = 4 * 1024 * 1024
# The same by lines: each line costs the parser ~180 bytes whatever its length, so 32 MiB of
# blank or one-character lines (16M lines) would take gigabytes; a real 32 MiB log has ~300k.
MAX_LINES = 300_000
HEAD_LINES = 40_000
TRUNCATED_NOTE = "note: the log was larger than 32 MiB or 300,000 lines; its head and tail were read"
# Text logs hold almost no control bytes; a binary file (a .pt shard, an
# image) pasted by mistake holds many.
BINARY_SAMPLE = 64 * 1024
BINARY_CONTROL_RATIO = 0.10
_TEXT_CONTROLS = {9, 10, 12, 13, 27}  # \t \n \f \r ESC (ANSI colours)
_CONTROLS = bytes(b for b in range(32) if b not in _TEXT_CONTROLS)  # counted by bytes.translate, in C


class LogText(Frozen):
    _fields = ("text", "source", "size", "truncated", "decode_errors", "cuts")

    def __init__(self, text: str, source: str, size: int, truncated: bool = False, decode_errors: int = 0,
                 cuts: tuple = ()):
        self.text, self.source, self.size, self.truncated, self.decode_errors = text, source, size, truncated, decode_errors
        # Where lines were left out of `text` (its head and tail kept): (after line N of the text
        # as it then was, lines left out), in the order to apply them; see real_line.
        self.cuts = cuts


def real_line(no: int, cuts: tuple) -> int:
    """A line's number in the whole log, from its number in the text kept of it."""
    for after, skipped in cuts:
        if no > after:
            no += skipped
    return no


GZIP_MAGIC = b"\x1f\x8b"
CHUNK = 1024 * 1024


def read_log(path: str, max_bytes: int = MAX_BYTES) -> LogText:
    """Read `path` ('-' is stdin; gzip or plain) into text, refusing what is not a log."""
    source = "<stdin>" if path == "-" else path
    stream = sys.stdin.buffer if path == "-" else os.fdopen(open_file(path), "rb")
    try:
        data, size, dropped = _head_and_tail(stream, source, max_bytes)
    except OSError as exc:
        raise BadInput(f"cannot read {source}: {exc.strerror or exc}") from None
    finally:
        if path != "-":
            stream.close()
    return decode_log(data, source, max_bytes, size=size, dropped=dropped)


def _head_and_tail(stream: io.BufferedIOBase, source: str, max_bytes: int) -> tuple[bytes, int, int]:
    """At most `max_bytes` (+1 for the joint) of the log: all of it, or its head and its tail;
    the log's whole size; and the newlines in what was left out (counted a chunk at a time, so
    the lines after the joint keep their numbers in the whole log)."""
    if stream.peek(2)[:2] == GZIP_MAGIC:
        return _gunzip(stream, source, max_bytes)
    info = os.fstat(stream.fileno())
    if stat.S_ISREG(info.st_mode) and info.st_size > max_bytes:
        head = stream.read(HEAD_BYTES)
        tail_at = info.st_size - (max_bytes - HEAD_BYTES)
        dropped, left = 0, tail_at - len(head)
        while left > 0:
            chunk = stream.read(min(CHUNK, left))
            if not chunk:
                break
            dropped += chunk.count(b"\n")
            left -= len(chunk)
        stream.seek(tail_at)
        return head + b"\n" + stream.read(), info.st_size, dropped
    return _keep_ends(iter(lambda: stream.read(CHUNK), b""), max_bytes)


def _gunzip(stream: io.BufferedIOBase, source: str, max_bytes: int) -> tuple[bytes, int, int]:
    import gzip  # here: its import (zlib, struct) costs every cold classify of a plain log ~1 ms
    import zlib

    try:
        with gzip.GzipFile(fileobj=stream) as unzipped:
            return _keep_ends(iter(lambda: unzipped.read(CHUNK), b""), max_bytes)
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise BadInput(f"{source} is not a whole gzip file ({exc or 'it ends early'}); "
                       "pass the log uncompressed or the complete .gz") from None


def _keep_ends(chunks, max_bytes: int) -> tuple[bytes, int, int]:
    """Read `chunks` holding at most `max_bytes`: the head, then a tail trimmed as it grows (and
    the newlines trimmed off counted)."""
    head, tail, size, dropped = bytearray(), bytearray(), 0, 0
    keep = max_bytes - HEAD_BYTES
    for chunk in chunks:
        size += len(chunk)
        if len(head) < HEAD_BYTES:
            room = HEAD_BYTES - len(head)
            head += chunk[:room]
            chunk = chunk[room:]
        tail += chunk
        if len(tail) > 2 * keep:  # trim now and then, not on every chunk
            dropped += tail.count(b"\n", 0, len(tail) - keep)
            del tail[:-keep]
    if size <= max_bytes:
        return bytes(head + tail), size, 0
    dropped += tail.count(b"\n", 0, max(0, len(tail) - keep))
    return bytes(head) + b"\n" + bytes(tail[-keep:]), size, dropped


def read_file(path: str, limit: int = -1, *, what: str = "a log file (or '-' for stdin)") -> bytes:
    """A file the user named, or BadInput with one line saying why it cannot be read."""
    with os.fdopen(open_file(path, what=what), "rb") as handle:
        try:
            return handle.read(limit)
        except OSError as exc:
            raise BadInput(f"cannot read {path}: {exc.strerror or exc}") from None


def open_file(path: str, *, what: str = "a log file (or '-' for stdin)") -> int:
    """A read-only file descriptor for a file the user named, or BadInput saying why not."""
    if os.path.isdir(path):
        raise BadInput(f"{path} is a directory; pass {what}")
    try:
        return os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise BadInput(f"no such file: {path}") from None
    except PermissionError:
        raise BadInput(f"permission denied reading {path} (running as uid {os.getuid()})") from None
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror or exc}") from None


def decode_log(data: bytes, source: str = "<text>", max_bytes: int = MAX_BYTES, size: int | None = None,
               dropped: int = 0) -> LogText:
    """Text of a log's bytes; `size` is the whole log's when `data` is already its head and tail,
    `dropped` the newlines in what was left out between them."""
    size = len(data) if size is None else size
    if size == 0:
        raise BadInput(f"{source} is empty; paste or pass the failing job's log")
    truncated = size > max_bytes
    if truncated and len(data) > max_bytes + 1:
        tail = max_bytes - HEAD_BYTES
        dropped = data.count(b"\n", HEAD_BYTES, len(data) - tail)
        data = data[:HEAD_BYTES] + b"\n" + data[-tail:]
    cuts = []
    if truncated:
        # The joint's newline ends the head's last line early, and the tail's first line starts
        # mid-line: the lines after it are `dropped - 1` further on in the whole log.
        cuts.append((data.count(b"\n", 0, HEAD_BYTES) + 1, dropped - 1))
    refuse_binary(data, source)
    text = data.decode("utf-8", errors="replace")
    # Count undecodable bytes only when there were some: the count is cheap
    # next to the decode but not free on a 30 MB paste.
    errors = text.count("\ufffd") if "\ufffd" in text else 0
    if "\x00" in text:
        text = text.replace("\x00", "")
    lines = text.count("\n")
    if lines > MAX_LINES:
        text, truncated = keep_end_lines(text), True
        # applied first: these numbers are the byte cut's text's, with lines left out after HEAD_LINES
        cuts.insert(0, (HEAD_LINES, lines - text.count("\n")))
    return LogText(text, source, size, truncated, errors, tuple(cuts))


def keep_end_lines(text: str, head: int = HEAD_LINES, most: int = MAX_LINES) -> str:
    """The first `head` lines and the last `most - head` of a text with more than `most` lines,
    found with str.find/rfind (never a list of every line: that is what the cap is for)."""
    cut = -1
    for _ in range(head):
        cut = text.find("\n", cut + 1)
    start = len(text) - text.endswith("\n")  # a final newline ends the last line, it starts none
    for _ in range(most - head):
        start = text.rfind("\n", 0, start)
    return text[:cut + 1] + text[start + 1:]


def refuse_binary(data: bytes, source: str) -> None:
    sample = data[:BINARY_SAMPLE]
    controls = len(sample) - len(sample.translate(None, _CONTROLS))
    if controls > BINARY_CONTROL_RATIO * len(sample):
        hint = ""
        if sample.startswith(b"PK\x03\x04"):
            hint = " (it is a zip archive: a torch .pt file? use `ds-triage probe` on checkpoints)"
        raise BadInput(
            f"{source} does not look like a text log: {controls} of its first "
            f"{len(sample)} bytes are control characters{hint}"
        )


def json_object(data: bytes, label: str, what: str = "a JSON object") -> dict:
    """Parse bytes the user gave as a JSON object, or BadInput saying what is wrong."""
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInput(f"{label}: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise BadInput(f"{label}: {what} is a JSON object, this is a {type(value).__name__}")
    return value
