"""The server's side of the stream: batches in, incidents out, shared by request threads.

A log shipper's HTTP sink sends records in batches; an incident may start in one batch and
end three batches later, so one StreamTriage assembles across them (guarded by a lock).
Closed incidents get an id, are kept (the last `keep`) for GET /incidents, written to
stdout as JSON lines, and returned by the request whose batch closed them. A ticker
thread closes incidents whose stream went idle between batches.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from typing import Callable

from triage.stream.pipeline import StreamTriage
from triage.stream.records import Decoder, Record


class Ingest:
    def __init__(self, make_triage: Callable[[Callable[[dict], None]], StreamTriage], *,
                 keep: int = 1000, write: Callable[[dict], None] | None = None):
        self.lock = threading.Lock()
        self.kept: deque[dict] = deque(maxlen=keep)
        self.write = write
        self._closed_now: list[dict] = []
        self.on_close: Callable[[dict], None] | None = None  # serve's metrics count each incident
        self.triage = make_triage(self._closed)
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def _closed(self, incident: dict) -> None:  # called with the lock held
        incident["id"] = incident["seq"]
        self.kept.append(incident)
        self._closed_now.append(incident)
        if self.write:
            self.write(incident)
        if self.on_close:
            self.on_close(incident)

    def add_values(self, values: list, decoder: Decoder) -> dict:
        """Parsed JSON values of one request: what was read, and the incidents it closed."""
        with self.lock:
            before = dict(decoder.stats)
            records = [r for value in values for r in decoder.from_value(value)]
            counts = {k: decoder.stats[k] - before[k] for k in ("records", "malformed", "no_message")}
            return {**counts, "incidents": self._add(records)}

    def add_lines(self, text: str, stream: str | None) -> dict:
        key = (("stream", stream),) if stream else ()
        records = [Record(key, line) for line in text.splitlines()]
        with self.lock:
            return {"records": len(records), "malformed": 0, "no_message": 0, "incidents": self._add(records)}

    def _add(self, records: list[Record]) -> list[dict]:
        self._closed_now = []
        self.triage.add(records, time.monotonic())
        return self._closed_now

    def flush(self) -> list[dict]:
        with self.lock:
            self._closed_now = []
            self.triage.flush()
            return self._closed_now

    def since(self, after: int, limit: int) -> list[dict]:
        with self.lock:
            return [i for i in self.kept if i["id"] > after][:limit]

    def open_incidents(self) -> int:
        # No lock: /healthz and /metrics must answer while a long batch holds it, and reading a
        # dict's length is atomic.
        return len(self.triage.assembler.open)

    def start_ticker(self, every: float = 0.5) -> None:
        def run():
            while not self._stop.wait(every):
                with self.lock:
                    self.triage.tick(time.monotonic())

        self._ticker = threading.Thread(target=run, name="ds-triage-idle", daemon=True)
        self._ticker.start()

    def stop(self) -> None:
        self._stop.set()
        if self._ticker:
            self._ticker.join()


def json_values(text: str) -> tuple[list, int]:
    """Every JSON value in a body: one document, an array, NDJSON (Fluent Bit json_lines,
    Vector ndjson) or concatenated values (Fluent Bit json_stream). A value that does not
    parse is counted and skipped up to the next line."""
    decoder = json.JSONDecoder()
    values, malformed, pos, end = [], 0, 0, len(text)
    while True:
        while pos < end and text[pos] in " \t\r\n\ufeff":
            pos += 1
        if pos >= end:
            return values, malformed
        try:
            value, pos = decoder.raw_decode(text, pos)
            values.append(value)
        except ValueError:
            malformed += 1
            nl = text.find("\n", pos)
            pos = end if nl < 0 else nl + 1
