"""The map side: lines of stored logs -> records keyed by their stream, in input order.

Spark's text source hands each task the lines of one or more file splits, in order. Each line
goes through the stream's own Decoder (stream/records.py: plain, CRI, Docker, Fluent Bit,
Vector, Loki, Elasticsearch) and each record comes out as a row the shuffle can sort:

    (stream key as JSON, file, split start, row in the split, text, time as JSON, partial)

A record without a stream key (a plain or CRI line, a Docker json-file record) is named by
its file: one job a file. A split that is binary data (a `.pt` shard in the log bucket) is
set aside whole with the reason classify gives for such a file, and never decoded.
"""

from __future__ import annotations

import json
from typing import Callable, Iterable, Iterator

from triage.errors import BadInput
from triage.logs.inputs import BINARY_SAMPLE, refuse_binary
from triage.stream.records import Decoder, Key

FILE_FIELD = "file"  # the stream key of a record that names no stream: its file


def stream_key(key: Key, path: str) -> Key:
    return key if key else ((FILE_FIELD, path),)


def key_text(key: Key) -> str:
    return json.dumps(key, ensure_ascii=False, separators=(",", ":"))


def key_of(text: str) -> Key:
    return tuple((str(name), str(value)) for name, value in json.loads(text))


def decode_rows(rows: Iterable[tuple[str, str, int]], decoder: Decoder,
                binary: Callable[[str, str], None]) -> Iterator[tuple]:
    """(line, file, split start) in input order -> sortable record rows. binary(file, reason):
    called once for each split that is binary data; its lines are dropped."""
    split = Split(None, decoder, binary)
    for value, path, block in rows:
        if (path, block) != split.at:
            yield from split.end()
            split = Split((path, block), decoder, binary)
        yield from split.add(value)
    yield from split.end()


class Split:
    """The lines of one file split: its head sampled for binary data, then each line decoded."""

    def __init__(self, at: tuple[str, int] | None, decoder: Decoder, binary: Callable[[str, str], None]):
        self.at = at
        self.decoder = decoder
        self.binary = binary
        self.row = 0
        self.head: list[str] | None = []  # the lines held while the head is sampled; None once decided
        self.held = 0
        self.skip = False

    def add(self, value: str) -> Iterator[tuple]:
        if self.head is None:
            if not self.skip:
                yield from self._decoded(value)
            return
        self.head.append(value)
        self.held += len(value) + 1
        if self.held >= BINARY_SAMPLE:
            yield from self._decide()

    def end(self) -> Iterator[tuple]:
        if self.head:
            yield from self._decide()

    def _decide(self) -> Iterator[tuple]:
        head, self.head = self.head, None
        sample = "\n".join(head).encode("utf-8", "surrogateescape")[:BINARY_SAMPLE]
        try:
            refuse_binary(sample, self.at[0])
        except BadInput as exc:
            self.skip = True
            self.binary(self.at[0], exc.message)
            return
        for value in head:
            yield from self._decoded(value)

    def _decoded(self, value: str) -> Iterator[tuple]:
        self.row += 1
        path, block = self.at
        for record in self.decoder.decode(value.encode("utf-8", "surrogateescape")):
            when = None if record.time is None else json.dumps(record.time)
            yield (key_text(stream_key(record.key, path)), path, block, self.row, record.text, when, record.partial)
