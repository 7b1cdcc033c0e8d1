"""The first pass: each whole file through stream's own block scanner, on an executor.

A record that names no stream (a plain or CRI line, a Docker json-file record) is in its
file's stream (one job a file), and that stream is whole in the file: its incidents are
assembled right here, exactly as `ds-triage stream FILE` assembles them (the Hyperscan
prefilter over big blocks, only the lines near a hit decoded), and are final.

A record that names a stream (a pod's Fluent Bit record) may have its stream's other records
in other files: here it is only noted whether its stream may open an incident. The assembler
opens one only on a line whose text holds a trigger (assemble.py, `_line`), and the scanner
decodes every raw line holding a trigger literal, so every record that may open one is seen
here: a stream none of whose records holds a trigger has no incident, and never leaves this
pass. A record that is the head of a split line (CRI P, a Docker record cut at 16 KiB) makes
its stream a candidate too, since the trigger may be in the joined line. For each candidate
the pass also notes the key's values whose JSON text stands in the record's raw line (the
literals the second pass finds its lines by, route.py).
"""

from __future__ import annotations

from typing import Iterable, Iterator

from triage.errors import BadInput
from triage.logs.inputs import BINARY_SAMPLE, refuse_binary
from triage.stream.assemble import Assembler
from triage.stream.records import Decoder, Key, Record
from triage.stream.scan import Scanner, key_literals

MAX_SEEN = 100_000  # named streams remembered per task (to tell a distinctive literal)


class FileAssembler(Assembler):
    """Assembles the records that name no stream; of the others, notes the streams that may
    open an incident (candidates) and the streams seen."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.raw_line = lambda: b""  # the scanner's current raw line
        self.candidates: dict[Key, list[tuple[str, str, bytes]]] = {}
        self.seen: set[Key] = set()

    def add(self, record: Record, no: int, hint, now: float) -> None:
        key = record.key
        if not key:
            super().add(record, no, hint, now)
            return
        self.touch(key)
        if key in self.candidates:
            return
        if record.partial or ((hint is None or hint.trigger) and self.prefilter.is_trigger(record.text)):
            self.candidates[key] = key_literals(key, self.raw_line())

    def touch(self, key: Key) -> None:
        if not key:
            super().touch(key)
        elif len(self.seen) < MAX_SEEN:
            self.seen.add(key)

    def remember_match(self, key: Key, check: int, no: int, text: str) -> None:
        if not key:
            super().remember_match(key, check, no, text)


def scan_file(path: str, chunks: Iterable[bytes], decoder: Decoder, prefilter, limits, closed: list) -> Iterator[tuple]:
    """One whole file, in chunks (its head first) -> ("window", window) for each closed window of
    its own stream (appended to `closed` by the assembler), then ("candidate", key, literals),
    ("seen", key) and ("file", path, bytes, lines, named) where `named` says that records naming
    a stream may be in it. A binary file: ("binary", path, reason) and its size, nothing else."""
    assembler = FileAssembler(prefilter, limits, closed.append)
    scanner = Scanner(decoder, prefilter, assembler)
    assembler.raw_line = lambda: scanner.raw_line
    chunks = iter(chunks)
    size = lines = 0
    named = last = None
    for chunk in chunks:
        if not size:
            try:
                refuse_binary(chunk[:BINARY_SAMPLE], path)
            except BadInput as exc:
                yield ("binary", path, exc.message)
                size, lines = _rest(chunk, chunks)
                yield ("file", path, size, lines, False)
                return
        named = named or may_name_streams(decoder, (last or b"") + chunk)
        size += len(chunk)
        lines += chunk.count(b"\n")
        last = chunk[-16:]  # a marker cut between two chunks is found in the next
        scanner.feed(chunk, 0.0)
        yield from (("window", w) for w in _drain(closed))
    scanner.finish(0.0)
    yield from (("window", w) for w in _drain(closed))
    for key, literals in assembler.candidates.items():
        yield ("candidate", key, literals)
    for key in assembler.seen:
        yield ("seen", key)
    named = named or bool(assembler.seen)  # some line the decoder read as JSON after all
    yield ("file", path, size, lines + (1 if last and not last.endswith(b"\n") else 0), bool(named))


def _rest(head: bytes, chunks: Iterator[bytes]) -> tuple[int, int]:
    """Size and lines of a file from its head on (a binary file, only counted)."""
    size, lines, last = len(head), head.count(b"\n"), head[-1:]
    for chunk in chunks:
        size, lines, last = size + len(chunk), lines + chunk.count(b"\n"), chunk[-1:]
    return size, lines + (1 if last and last != b"\n" else 0)


def may_name_streams(decoder: Decoder, data: bytes) -> bool:
    """Records naming a stream may be in the file: not a plain log nor CRI lines (whose records
    name none), and not a file the decoder would read as plain text throughout."""
    if decoder.format in ("plain", "cri") or (decoder.format == "docker" and not decoder.key_fields):
        return False
    return not decoder.plain_chunk(data)


def _drain(closed: list) -> list:
    out = closed[:]
    closed.clear()
    return out
