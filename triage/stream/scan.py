"""Raw bytes -> lines -> records -> the assembler, skipping chatter without decoding it.

While no incident is open, the scanner jumps from one trigger line to the next (prefilter.py
says where they stand in the buffer); the lines in between are only counted, except the
context lines rules read (DeepSpeed's per-step "step=.., skipped=.." line, the config dump):
for each context check only its newest matching line is decoded and kept. While an incident
is open every line is decoded and routed to its stream, since its frames and messages hold
no trigger word but belong to it.
"""

from __future__ import annotations

from triage.stream.assemble import Assembler
from triage.stream.prefilter import NO_HIT, Hint, Prefilter
from triage.stream.records import Decoder


class Scanner:
    def __init__(self, decoder: Decoder, prefilter: Prefilter, assembler: Assembler, *,
                 decode_all: bool = False, max_raw_line: int = 4 << 20):
        self.decoder = decoder
        self.prefilter = prefilter
        self.forms = prefilter.forms
        self.matcher = prefilter.matcher
        self.assembler = assembler
        self.decode_all = decode_all  # decode every line: exact malformed counts, slower
        self.max_raw_line = max_raw_line  # a longer line without a newline is cut here
        self.lines = 0
        self.bytes = 0
        self.cut_lines = 0
        self._rest = b""

    def feed(self, data: bytes, now: float) -> None:
        self.bytes += len(data)
        buf = self._rest + data if self._rest else data
        end = buf.rfind(b"\n") + 1
        if end == 0:
            if len(buf) <= self.max_raw_line:
                self._rest = buf
                return
            self.cut_lines += 1  # bounded memory: a "line" that never ends is cut
            buf, end = buf + b"\n", len(buf) + 1
        self._rest = buf[end:]
        data = buf[:end] if end < len(buf) else buf
        (self._scan if self.matcher.complete else self._scan_lines)(data, now)

    def finish(self, now: float) -> None:
        if self._rest:  # the last line had no newline
            rest, self._rest = self._rest + b"\n", b""
            (self._scan if self.matcher.complete else self._scan_lines)(rest, now)
        self.assembler.finish(now)

    def _scan(self, data: bytes, now: float) -> None:
        """Whole lines of `data` (it ends with a newline), with Hyperscan's answers."""
        triggers = self.matcher.stop_starts(data)  # triggers and run starts, each seen alone
        present = self.matcher.context_present(data)
        plain = bool(present) and self.decoder.plain_chunk(data) and not any(self.forms[f].literal.ignore_case for f in present)
        pos = t = 0
        while pos < len(data):
            if self.decode_all or self.assembler.busy:
                end = data.find(b"\n", pos)
                self._line(data[pos:end], now)
                pos = end + 1
                continue
            while t < len(triggers) and triggers[t] < pos:
                t += 1
            if t < len(triggers):  # the next trigger's line starts here
                stop = data.rfind(b"\n", pos, triggers[t]) + 1 or pos
            else:
                stop = len(data)
            if stop > pos:
                if present:
                    self._context(data, pos, stop, present, plain, now)
                else:
                    self.lines += data.count(b"\n", pos, stop)
                pos = stop
            if t < len(triggers):
                end = data.find(b"\n", pos)
                self._line(data[pos:end], now)
                pos = end + 1

    def _context(self, data: bytes, pos: int, stop: int, present: set[int], plain: bool, now: float) -> None:
        """Lines [pos, stop) hold no trigger and no incident is open: keep context lines only."""
        if not plain:
            self._scan_lines(data[pos:stop], now)  # JSON: each context line names its own stream
            return
        for check in set().union(*(self.forms[f].checks for f in present)):
            self._newest(data, pos, stop, check, [f for f in present if check in self.forms[f].checks])
        self.lines += data.count(b"\n", pos, stop)

    def _newest(self, data: bytes, pos: int, stop: int, check: int, forms: list[int]) -> None:
        """Plain lines: the newest line in [pos, stop) that matches the check, found from the end."""
        limits = {f: stop for f in forms}
        while limits:
            at, form = max((data.rfind(self.forms[f].data, pos, limit), f) for f, limit in limits.items())
            if at < 0:
                return
            start = data.rfind(b"\n", pos, at) + 1 or pos
            text = self.decoder.plain_text(data[start:data.find(b"\n", at)])
            if self.prefilter.check_matches(check, text):
                self.assembler.remember_match((), check, self.lines + data.count(b"\n", pos, start) + 1, text)
                return
            limits[form] = at

    def _scan_lines(self, data: bytes, now: float) -> None:
        """Every line holding any form is routed; the rest is skipped unless an incident is open."""
        hits = self.matcher.hits(data)
        pos = i = 0
        while i < len(hits):
            at = hits[i][0]
            start = data.rfind(b"\n", pos, at) + 1 or pos
            end = data.find(b"\n", at)
            forms = []
            while i < len(hits) and hits[i][0] < end:  # every hit on this line
                forms.append(hits[i][1])
                i += 1
            self._between(data, pos, start, now)
            self._line(data[start:end], now, forms)
            pos = end + 1
        self._between(data, pos, len(data), now)

    def _between(self, data: bytes, pos: int, stop: int, now: float) -> None:
        while pos < stop:
            if not (self.decode_all or self.assembler.busy):
                self.lines += data.count(b"\n", pos, stop)
                return
            end = data.find(b"\n", pos, stop)
            self._line(data[pos:end], now)
            pos = end + 1

    def _line(self, raw: bytes, now: float, forms: list[int] | None = None) -> None:
        """Decode one line and route its records, with what its literals say."""
        hint: Hint | None = None  # the `re` fallback cannot tell: the text is searched
        if self.matcher.complete:
            if forms is None:
                forms = [f for _, f in self.matcher.hits(raw)]
            hint = self.prefilter.hint(forms) if forms else NO_HIT
        self.lines += 1
        for record in self.decoder.decode(raw):
            self.assembler.add(record, self.lines, hint, now)
