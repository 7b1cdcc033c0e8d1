"""The stream parts wired together, with the counts the summary reports."""

from __future__ import annotations

import time
from functools import partial
from typing import Callable

from triage.kb import RuleSet
from triage.stream.assemble import Assembler, Limits, Window
from triage.stream.emit import SCHEMA_VERSION, incident_json
from triage.stream.prefilter import Prefilter
from triage.stream.records import Decoder, Record
from triage.stream.scan import Scanner


class StreamTriage:
    def __init__(self, rules: RuleSet, write: Callable[[dict], None], *, decoder: Decoder | None = None,
                 limits: Limits | None = None, decode_all: bool = False, prefilter: Prefilter | None = None):
        from triage.classify.classifier import classify

        self.write = write
        self.decoder = decoder or Decoder()
        self.prefilter = prefilter or Prefilter(rules.rules)
        self.assembler = Assembler(self.prefilter, limits or Limits(), self.take_window)
        self.scanner = Scanner(self.decoder, self.prefilter, self.assembler, decode_all=decode_all)
        self._classify = partial(classify, rules=rules)
        self.started = time.monotonic()
        self.candidates = 0  # windows classified
        self.incidents = 0
        self.checkpoint_incidents = 0  # incidents whose top cause is a checkpoint-loading failure

    # raw input (the CLI)
    def feed(self, data: bytes, now: float) -> None:
        self.scanner.feed(data, now)

    # parsed input (the HTTP ingest route): every record is looked at
    def add(self, records: list[Record], now: float) -> None:
        for record in records:
            self.scanner.lines += 1
            self.assembler.add(record, self.scanner.lines, None, now)

    def tick(self, now: float) -> None:
        self.assembler.tick(now)

    def finish(self, now: float) -> None:
        self.scanner.finish(now)

    def flush(self) -> None:
        """Close every open incident now (the input has not ended)."""
        self.assembler.finish(time.monotonic())

    def take_window(self, window: Window) -> None:
        """A closed incident window (the assembler's, or one a child process read: split.py):
        classified, and written when it is an incident."""
        self.candidates += 1
        data = incident_json(window, self.incidents + 1, self._classify)
        if data is None:
            return
        self.incidents += 1
        if data["classification"]["category"] != "unknown":
            self.checkpoint_incidents += 1
        self.write(data)

    def summary(self) -> dict:
        seconds = time.monotonic() - self.started
        stats = self.decoder.stats
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": "summary",
            "lines": self.scanner.lines,
            "bytes": self.scanner.bytes,
            "records": stats["records"],
            "malformed": stats["malformed"],
            "no_message": stats["no_message"],
            "candidates": self.candidates,
            "incidents": self.incidents,
            "checkpoint_incidents": self.checkpoint_incidents,
            "streams_tracked": len(self.assembler.streams),
            "evicted": self.assembler.evicted,
            "seconds": round(seconds, 3),
        }
