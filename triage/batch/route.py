"""The second pass, map side: the raw lines of the candidate streams, found by their literals.

Each candidate stream (files.py) is named by a literal: the JSON text of one of its key's
values (its pod name, as a record writes it: `"trainer-7"`) that its records hold, the same
assumption stream's scanner makes when it follows an open incident's stream by its literal
(scan.py). One Hyperscan search over the file finds every line holding a literal; those lines
go, undecoded, to their stream, with their line numbers in the file. A line that holds
another stream's literal by chance goes along and is dropped when decoded (streams.py keeps
only its own key's records). When some candidate has no literal (a key of numbers), every
line is decoded and routed by the key it names: slower, the same lines.

Each (stream, file) pair gives one item: the lines joined, and their numbers as an array.
"""

from __future__ import annotations

import re
from array import array
from typing import Iterable, Iterator

from triage.stream.records import Decoder, Key

try:
    import hyperscan
except ImportError:  # pragma: no cover - the standard library finds the same lines, slower
    hyperscan = None


class Router:
    def __init__(self, literals: list[bytes | None], decoder: Decoder, keys: list[Key]):
        """literals[i]: the literal of candidate stream i (keys[i]), None when it has none."""
        self.decoder = decoder
        self.by_key = {key: i for i, key in enumerate(keys)}
        self.decode_all = any(lit is None for lit in literals)
        unique = sorted({lit for lit in literals if lit is not None})
        self.targets = [[i for i, lit in enumerate(literals) if lit == u] for u in unique]
        self._db = None
        if not self.decode_all and unique:
            if hyperscan is not None:
                self._db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
                self._db.compile(expressions=[re.escape(u.decode()).encode() for u in unique],
                                 ids=list(range(len(unique))), elements=len(unique))
            else:
                self._re = re.compile(b"|".join(re.escape(u) for u in unique))
                self._index = {u: n for n, u in enumerate(unique)}

    def route(self, blocks: Iterable[bytes]) -> Iterator[tuple[int, bytes, bytes]]:
        """A file's blocks of whole lines -> (candidate index, its lines in the file joined,
        their 1-based numbers as array('q') bytes)."""
        found: dict[int, tuple[list, array]] = {}
        before = 0  # lines of the file before the block
        for data in blocks:
            if not data.endswith(b"\n"):
                data += b"\n"  # the file's last line
            if self.decode_all:
                self._decoded(data, before, found)
            else:
                self._lines(data, self._hits(data), before, found)
            before += data.count(b"\n")
        for i, (parts, numbers) in sorted(found.items()):
            yield i, b"".join(parts), numbers.tobytes()

    def _hits(self, data: bytes) -> list[tuple[int, int]]:
        if self._db is None and not hasattr(self, "_re"):
            return []
        if self._db is not None:
            hits: list[tuple[int, int]] = []
            self._db.scan(data, match_event_handler=lambda n, _s, end, _f, _c: hits.append((end, n)))
            hits.sort()
            return hits
        return [(m.end(), self._index[m.group(0)]) for m in self._re.finditer(data)]

    def _lines(self, data: bytes, hits: list[tuple[int, int]], before: int, found: dict) -> None:
        last: dict[int, int] = {}  # stream -> start of the last line given to it
        line_start, line_end, counted = -1, -1, 0  # before: lines before `counted`
        for at, n in hits:  # at: where the literal ends (it holds no newline)
            if at > line_end:  # a new line
                line_start = data.rfind(b"\n", 0, at - 1) + 1
                before += data.count(b"\n", counted, line_start)
                counted, no = line_start, before + 1
                line_end = data.find(b"\n", at - 1)
                if line_end < 0:
                    line_end = len(data)
            for i in self.targets[n]:
                if last.get(i) == line_start:
                    continue
                last[i] = line_start
                parts, numbers = found.setdefault(i, ([], array("q")))
                parts.append(data[line_start:line_end + 1])
                numbers.append(no)

    def _decoded(self, data: bytes, before: int, found: dict) -> None:
        decode, by_key = self.decoder.decode, self.by_key
        for no, raw in enumerate(data[:-1].split(b"\n"), before + 1):
            targets = {by_key[r.key] for r in decode(raw) if r.key in by_key}
            for i in sorted(targets):
                parts, numbers = found.setdefault(i, ([], array("q")))
                parts.append(raw + b"\n")
                numbers.append(no)
