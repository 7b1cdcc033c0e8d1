"""The second pass, reduce side: one candidate stream's raw lines, in order, -> its incidents.

The lines route.py found for the stream, from every file in input order, go through stream's
own block scanner and assembler, as `stream` reads them. The assembler keeps only the
stream's own records (a line that held its literal by chance names another stream), so what
it holds is what `stream` holds for this stream: a stream's assembly depends on its own
records alone (each has its own state in assemble.py), and both paths equal the per-line
path, in which every record of the stream is added in order (tests/test_stream_chunked.py).
The scanner counts the stream's lines; each is put back to (file, line in the file).
"""

from __future__ import annotations

from array import array
from typing import Iterable, Iterator

from triage.batch.windows import FILE_SHIFT, incidents
from triage.stream.assemble import Assembler
from triage.stream.records import Decoder, Key, Record
from triage.stream.scan import Scanner

FEED = 4 << 20  # bytes handed to the scanner at once


class OneStream(Assembler):
    """An assembler that takes the records of one stream and ignores the others."""

    def __init__(self, key: Key, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.key = key

    def add(self, record: Record, no: int, hint, now: float) -> None:
        if record.key == self.key:
            super().add(record, no, hint, now)

    def touch(self, key: Key) -> None:
        if key == self.key:
            super().touch(key)

    def remember_match(self, key: Key, check: int, no: int, text: str) -> None:
        if key == self.key:
            super().remember_match(key, check, no, text)


def assemble_stream(key: Key, parts: Iterable[tuple[int, str, bytes, bytes]], decoder: Decoder,
                    prefilter, limits, classify) -> Iterator[dict]:
    """parts: (file order, file, its lines of the stream, their numbers as array('q') bytes) ->
    the stream's incidents."""
    files: list[str] = []
    where = array("q")  # the stream's n-th line (1-based: where[n - 1]) as file index << 40 | line
    closed: list = []
    assembler = OneStream(key, prefilter, limits, closed.append)
    scanner = Scanner(decoder, prefilter, assembler)
    for _, path, lines, numbers in sorted(parts, key=lambda part: part[0]):
        index = len(files) << FILE_SHIFT
        files.append(path)
        numbers_of = array("q")
        numbers_of.frombytes(numbers)
        where.extend(index | n for n in numbers_of)
        for start in range(0, len(lines), FEED):  # the scanner holds a line cut between two feeds
            scanner.feed(lines[start:start + FEED], 0.0)
            yield from _placed(closed, where, files, classify)
    scanner.finish(0.0)
    yield from _placed(closed, where, files, classify)


def _placed(closed: list, where: array, files: list[str], classify) -> Iterator[dict]:
    for window in closed:
        window.first_no, window.last_no = where[window.first_no - 1], where[window.last_no - 1]
    yield from incidents(closed, files, classify)
