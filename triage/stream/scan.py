"""Raw bytes -> lines -> records -> the assembler, building Python objects only where they matter.

Each block the reader hands over (megabytes) is searched once, whole, for every prefilter
literal (Hyperscan, prefilter.py); the answer says which lines hold a literal and which. Then:

* a line with no literal while no incident is open is only counted: never cut out, never
  decoded;
* a trigger, run-start or partial line is decoded and routed to its stream, in order;
* a context line (a rule reads it from anywhere before the failure: DeepSpeed's per-step
  "step=.., skipped=.." line, the config dump): in a plain block (one stream) only the
  newest line of each context check is decoded, found from the end when a line that may
  open an incident is routed or the block ends (a run start does not make it look sooner: a
  fleet of short runs is walked once, not once a run). In a JSON block a line whose bytes
  show that none of its checks can match is skipped; the others are decoded (each names its
  own stream) and wait, per stream, until a line of that stream that may open an incident is
  routed or the block ends: then only the newest record matching
  each check is remembered (a stream's least-recent place, which matters only past
  `max_streams` streams, is set when they are);
* while incidents are open, every line of their streams is decoded and routed, since their
  frames and messages hold no literal but belong to them. A JSON record names its stream in
  its own bytes: each open stream has a literal (its pod name as JSON writes it, assemble.py
  asks `_literal` when it opens), and only the lines holding one of those are decoded. A
  stream without one (plain text, a number for a name), a stream mid-way through a split
  line, or more than assemble.MAX_FILTERED open streams: every line is decoded, as before.

The per-line path (every line decoded, its text searched) gives the same incidents: the
tests compare them on corpus logs, plain and in envelopes.
"""

from __future__ import annotations

import bisect
import json
import re

from triage.stream.assemble import Assembler
from triage.stream.prefilter import NO_HIT, Hint, Prefilter
from triage.stream.records import Decoder, Key

# A key value whose JSON text is the same whatever the encoder writes it: printable ASCII that
# no encoder escapes (not `"`, `\\`, `/`, `<`, `>`, `&`).
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9 _.:;,!#$%'()*+=?@^`{|}~\[\]-]+")


class Scanner:
    def __init__(self, decoder: Decoder, prefilter: Prefilter, assembler: Assembler, *,
                 decode_all: bool = False, max_raw_line: int = 4 << 20):
        self.decoder = decoder
        self.prefilter = prefilter
        self.forms = prefilter.forms
        self._is_stop = [form.stop for form in self.forms]
        self._checks_of = [form.checks for form in self.forms]
        self.matcher = prefilter.matcher
        self.assembler = assembler
        assembler.literal_of = self._literal
        self.decode_all = decode_all  # decode every line: exact malformed counts, slower
        self.max_raw_line = max_raw_line  # a longer line without a newline is cut here
        self.lines = 0
        self.bytes = 0
        self.cut_lines = 0
        self._rest = b""
        self._raw = b""  # the line being routed (for _literal)
        self._ascii_block: tuple[bytes | None, bool] = (None, False)
        self._pending: list[tuple[int, int, int, int]] = []  # plain context runs to settle: (i, k, pos, lines before)
        self._run_cut = 0  # the waiting runs before this index came before a run start
        self._later: dict[Key, list] = {}  # stream -> its JSON context records waiting (_defer)
        self._cuts: dict[Key, int] = {}  # stream -> how many of its waiting records came before its last run start

    def feed(self, data: bytes, now: float) -> None:
        """Whole lines are read where they stand in `data`: copying a 4 MB chunk to join the
        line the last one ended in costs more than the rest of a quiet chunk's reading."""
        self.bytes += len(data)
        start = 0
        if self._rest:  # the line the last chunk ended in, completed by this chunk's first line
            newline = data.find(b"\n")
            if newline < 0:  # it goes on past this chunk too
                data, self._rest = self._rest + data, b""
            else:
                head, self._rest = self._rest + data[:newline + 1], b""
                self._lines(head, 0, len(head), now)
                start = newline + 1
        end = data.rfind(b"\n", start) + 1
        if end == 0:
            if len(data) - start <= self.max_raw_line:
                self._rest = data[start:]
                return
            self.cut_lines += 1  # bounded memory: a "line" that never ends is cut
            data, start, end = data[start:] + b"\n", 0, len(data) - start + 1
        self._rest = data[end:]
        if end > start:
            self._lines(data, start, end, now)

    def finish(self, now: float) -> None:
        if self._rest:  # the last line had no newline
            rest, self._rest = self._rest + b"\n", b""
            self._lines(rest, 0, len(rest), now)
        self.assembler.finish(now)

    def _lines(self, data: bytes, start: int, end: int, now: float) -> None:
        """The whole lines data[start:end] (it ends with a newline)."""
        if self.matcher.complete:
            self._block(data, start, end, now)
        else:
            self._scan_lines(data, start, end, now)

    # Hyperscan: one search over the block says where every literal stands

    def _hits(self, data: bytes, start: int, end: int) -> list[tuple[int, int]]:
        """The matcher's hits in data[start:end]: it searches the whole buffer, the bytes around
        are the ends of lines read with the chunk before or after."""
        hits = self.matcher.hits(data)
        if start or end < len(data):
            hits = hits[bisect.bisect_left(hits, (start, -1)):bisect.bisect_left(hits, (end, -1))]
        return hits

    def _block(self, data: bytes, start: int, end: int, now: float) -> None:
        hits = self._hits(data, start, end)
        if self.decoder.plain_chunk(data, self.matcher.any_marker, start):
            self._plain_block(data, start, end, hits, now)
            return
        hint_of = self.prefilter.hint
        pos, i = start, 0
        while i < len(hits):
            line, line_end, ids, i = self._line_at(data, hits, i, pos)
            if line > pos:
                self._quiet(data, pos, line, now)
            pos = line_end + 1
            hint = hint_of(ids)
            if not (hint.stop or self.decode_all):  # a context line alone
                self.lines += 1
                self._defer(data[line:line_end], hint, self.lines, now)
                continue
            self._route(data[line:line_end], hint, now)
        self._quiet(data, pos, end, now)
        for key in list(self._later):
            self._flush(key)

    def _plain_block(self, data: bytes, start: int, end: int, hits: list[tuple[int, int]], now: float) -> None:
        """One stream: from one line that must be routed (a trigger, a run start, a split line)
        to the next, only the newest line matching each context check matters. Those runs of
        context lines wait (_pending) and are settled together, from the end, when a line that
        may open an incident is routed, or at the block's end: in a log of many short runs a
        check is then looked for once, not once per run. While an incident is open every line
        is routed in order."""
        is_stop = self._is_stop
        stops = [k for k, (_, form) in enumerate(hits) if is_stop[form]]
        pos, i, s = start, 0, 0
        while True:
            if not (self.decode_all or self.assembler.busy):
                while s < len(stops) and stops[s] < i:
                    s += 1
                stop = data.rfind(b"\n", pos, hits[stops[s]][0]) + 1 or pos if s < len(stops) else end
                k = bisect.bisect_left(hits, (stop, -1), i)
                if k > i:
                    self._pending.append((i, k, pos, self.lines))
                self.lines += data.count(b"\n", pos, stop)
                pos, i = stop, k
            if i >= len(hits):
                break
            line, line_end, ids, i = self._line_at(data, hits, i, pos)
            if line > pos:
                self._quiet(data, pos, line, now)
            pos = line_end + 1
            hint = self.prefilter.hint(ids)
            quiet_run_start = hint.run_start and not hint.trigger and not self.assembler.busy
            if self._pending and not (quiet_run_start and not hint.partial):
                self._settle(data, hits)
            self._route(data[line:line_end], hint, now)
            if quiet_run_start:  # the waiting runs' run_line matches are forgotten from here on
                self._run_cut = len(self._pending)
        self._settle(data, hits)
        self._quiet(data, pos, end, now)

    @staticmethod
    def _line_at(data: bytes, hits: list[tuple[int, int]], i: int, pos: int) -> tuple[int, int, list[int], int]:
        """The line of hit i: its start and end, the forms on it, the index of the next line's first hit."""
        at = hits[i][0]
        start = data.rfind(b"\n", pos, at) + 1 or pos
        end = data.find(b"\n", at)
        ids = []
        while i < len(hits) and hits[i][0] < end:
            ids.append(hits[i][1])
            i += 1
        return start, end, ids, i

    def _quiet(self, data: bytes, pos: int, stop: int, now: float) -> None:
        """Lines [pos, stop) hold no literal: skipped, unless an open incident's stream may own them."""
        a = self.assembler
        while pos < stop:
            if not (self.decode_all or a.busy):
                self.lines += data.count(b"\n", pos, stop)
                return
            if self.decode_all or a.every_line:
                end = data.find(b"\n", pos, stop)
                self._route(data[pos:end], NO_HIT, now)
                pos = end + 1
                continue
            starts = self._owned(data, pos, stop, [w.literal for w in a.open.values()])
            for start in starts:
                self.lines += data.count(b"\n", pos, start)
                end = data.find(b"\n", start, stop)
                self._route(data[start:end], NO_HIT, now)
                pos = end + 1
                if a.every_line:  # a split line began: from here on every line is read
                    break
            else:
                self.lines += data.count(b"\n", pos, stop)
                return

    @staticmethod
    def _owned(data: bytes, pos: int, stop: int, literals: list[bytes]) -> list[int]:
        """Starts of the lines in [pos, stop) that hold one of the literals, in order."""
        starts = set()
        for literal in set(literals):
            at = data.find(literal, pos, stop)
            while at >= 0:  # data[stop - 1] is a newline: each line found ends before stop
                starts.add(data.rfind(b"\n", pos, at) + 1 or pos)
                at = data.find(literal, data.find(b"\n", at, stop) + 1, stop)
        return sorted(starts)

    def _settle(self, data: bytes, hits: list[tuple[int, int]]) -> None:
        """For each context check, remember the newest line of the waiting runs that matches it,
        as routing every line in order would leave it: runs are walked from the newest, a check
        found in one is not looked for in older ones, and a run_line check not before the last
        run start (the assembler forgot those when it routed that line)."""
        pending, cut, self._pending, self._run_cut = self._pending, self._run_cut, [], 0
        settled: set[int] = set()
        for n in range(len(pending) - 1, -1, -1):
            skip = settled if n >= cut else settled | self.prefilter.run_scoped
            settled |= self._newest(data, hits, *pending[n], skip)

    def _newest(self, data: bytes, hits: list[tuple[int, int]], i: int, k: int, pos: int, base: int,
                skip: set[int]) -> set[int]:
        """Plain lines from pos (line base + 1) hold context literals only (hits[i:k]): for each
        check not in `skip`, the newest line that matches it is remembered; the lines are walked
        from the end until every check is settled. Returns the checks found."""
        checks_of, prefilter = self._checks_of, self.prefilter
        wanted = set().union(*(checks_of[f] for f in {form for _, form in hits[i:k]})) - skip
        ascii = self._ascii(data)
        found = []
        h = k
        while wanted and h > i:
            h -= 1
            at, form = hits[h]
            if checks_of[form].isdisjoint(wanted):  # most lines, once the common checks are settled
                continue
            start = data.rfind(b"\n", pos, at) + 1 or pos
            end = data.find(b"\n", at)
            ids = [form]
            while h > i and hits[h - 1][0] >= start:  # the line's other literals
                h -= 1
                ids.append(hits[h][1])
            text = None
            line_ascii = None
            for check in prefilter.hint(sorted(ids)).checks & wanted:
                if line_ascii is None:  # a block with a progress bar somewhere is mostly ASCII lines still
                    line_ascii = ascii or (raw := data[start:end]).isascii() and b"\x1b" not in raw
                if line_ascii and not prefilter.may_match_ascii(check, data, start, end):
                    continue
                if text is None:
                    # never None in a block plain_chunk passed: its markers find every JSON or CRI line
                    text = self.decoder.plain_text(data[start:end]) or ""
                if prefilter.check_matches(check, text):
                    wanted.discard(check)
                    found.append((start, check, text))
        for start, check, text in sorted(found):
            no = base + data.count(b"\n", pos, start) + 1
            self.assembler.remember_match((), check, no, text)
        return {check for _, check, _ in found}

    def _ascii(self, data: bytes) -> bool:
        """The block is ASCII with no escape character (no colours): its lines can be tested undecoded."""
        if self._ascii_block[0] is not data:
            self._ascii_block = (data, data.isascii() and b"\x1b" not in data)
        return self._ascii_block[1]

    def _route(self, raw: bytes, hint: Hint, now: float) -> None:
        """Decode one line and route its records, with what its literals say (NO_HIT: none)."""
        self.lines += 1
        no = self.lines
        self._raw = raw
        quiet_run_start = hint.run_start and not hint.trigger and not hint.partial
        for record in self.decoder.decode(raw):
            if self._later:
                if quiet_run_start and not record.partial and not self.assembler.owns(record.key):
                    # the stream's waiting records need not be settled before a line that opens
                    # nothing: only its run_line matches are forgotten from here on (_flush)
                    if record.key in self._later:
                        self._cuts[record.key] = len(self._later[record.key])
                else:
                    self._flush(record.key)
            self.assembler.add(record, no, hint, now)

    def _defer(self, raw: bytes, hint: Hint, no: int, now: float) -> None:
        """A JSON context line: its records wait, per stream, until a line of their stream is
        routed or the block ends; then only the newest that matches each check is remembered
        (_flush). Records of a stream with an open incident or a split line go in at once."""
        self._raw = raw
        for record in self.decoder.decode(raw):
            if record.partial or self.assembler.owns(record.key):
                if self._later:
                    self._flush(record.key)
                self.assembler.add(record, no, hint, now)
            else:
                self._later.setdefault(record.key, []).append((no, record, hint))

    def _flush(self, key: Key) -> None:
        """What routing a stream's waiting context records in order would have remembered."""
        waiting = self._later.pop(key, None)
        cut = self._cuts.pop(key, 0)  # records before it came before a run start of the stream
        if not waiting:
            return
        self.assembler.touch(key)
        wanted = set().union(*(hint.checks for _, _, hint in waiting))
        found = []
        for n in range(len(waiting) - 1, -1, -1):
            if n == cut - 1:
                wanted -= self.prefilter.run_scoped
            no, record, hint = waiting[n]
            if not hint.checks & wanted:
                continue
            parts = record.text.split("\n")  # as the assembler splits a record's text
            for p in range(len(parts) - 1, -1, -1):
                for check in hint.checks & wanted:
                    if self.prefilter.check_matches(check, parts[p]):
                        wanted.discard(check)
                        found.append((no, n, p, check, parts[p]))
            if not wanted:
                break
        for no, _, _, check, text in sorted(found):
            self.assembler.remember_match(key, check, no, text)

    def _literal(self, key: Key) -> bytes | None:
        """Bytes every raw line of the stream `key` holds (it just opened an incident on the line
        being routed): the JSON text of its most distinctive name. None: read every line."""
        best, best_shared = None, None
        for name, value, literal in key_literals(key, self._raw):
            shared = sum(1 for other in self._recent_keys() if (name, value) in other)
            if best is None or (shared, -len(literal)) < (best_shared, -len(best)):
                best, best_shared = literal, shared
        return best

    @property
    def raw_line(self) -> bytes:
        """The raw line whose records are being added (the assembler may ask)."""
        return self._raw

    def _recent_keys(self, n: int = 64):
        streams = self.assembler.streams
        for count, key in enumerate(reversed(streams)):
            if count >= n:
                return
            yield key

    # The standard library's `re` fallback: every line holding a literal is routed, its text searched

    def _scan_lines(self, data: bytes, start: int, end: int, now: float) -> None:
        hits = self._hits(data, start, end)
        pos, i = start, 0
        while i < len(hits):
            at = hits[i][0]
            line = data.rfind(b"\n", pos, at) + 1 or pos
            line_end = data.find(b"\n", at)
            while i < len(hits) and hits[i][0] < line_end:
                i += 1
            self._between(data, pos, line, now)
            self.lines += 1
            for record in self.decoder.decode(data[line:line_end]):
                self.assembler.add(record, self.lines, None, now)
            pos = line_end + 1
        self._between(data, pos, end, now)

    def _between(self, data: bytes, pos: int, stop: int, now: float) -> None:
        while pos < stop:
            if not (self.decode_all or self.assembler.busy):
                self.lines += data.count(b"\n", pos, stop)
                return
            end = data.find(b"\n", pos, stop)
            self.lines += 1
            for record in self.decoder.decode(data[pos:end]):
                self.assembler.add(record, self.lines, None, now)
            pos = end + 1


def key_literals(key: Key, raw: bytes) -> list[tuple[str, str, bytes]]:
    """(name, value, literal) for each part of the stream key whose JSON text (the literal) every
    raw line of the stream holds, as far as `raw`, one of its lines, shows."""
    found = []
    for name, value in key:
        if value in ("True", "False") or not _PLAIN_VALUE.fullmatch(value) or _is_number(value):
            continue  # a number or a boolean stands in the record unquoted
        literal = json.dumps(value).encode()
        if literal in raw:
            found.append((name, value, literal))
    return found


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
