"""The reduce side: one stream's records, in order, -> its incidents, as `stream` makes them.

Each stream's records go through the stream's own Assembler (stream/assemble.py) with no
literal hints, as stream's per-line path does (tests/test_stream_chunked.py holds the block
scanner to it), and each closed window through the stream's own incident_json (emit.py:
classify, the same JSON). A fresh Assembler per stream: the input is complete, so a stream's
last incident closes when its records end ("end-of-input"), never by the wall clock ("idle")
or by memory shared with other streams ("evicted").

What differs from `stream` is only where a line is: a stream may span files (a shipper's
hourly objects), so `lines.first` / `lines.last` are line numbers in `files.first` /
`files.last`; the assembler sees (file index << 40 | line), which keeps its order across files.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from functools import partial
from itertools import groupby
from typing import Iterable, Iterator

from triage.batch.rows import FILE_FIELD, key_of
from triage.stream.limits import Limits
from triage.stream.records import Record

FILE_SHIFT = 40  # lines a file may have: 2**40
_LINE = (1 << FILE_SHIFT) - 1
_DAY = re.compile(r"\d{4}-\d\d-\d\d")
_RULES: dict = {}  # rules directory -> (rules, prefilter, classify), once per executor process


def tools(rules_dir: str | None):
    """The rules, their prefilter and classify, loaded once per process (an executor's worker)."""
    if rules_dir not in _RULES:
        from triage.classify.classifier import classify
        from triage.kb import load_rules
        from triage.stream.prefilter import Prefilter

        rules = load_rules(rules_dir)
        _RULES[rules_dir] = (rules, Prefilter(rules.rules), partial(classify, rules=rules))
    return _RULES[rules_dir]


def assemble_sorted(items: Iterable[tuple], offsets: dict[tuple[str, int], int], limits: Limits,
                    rules_dir: str | None = None, docs_url: str | None = None) -> Iterator[dict]:
    """Rows of decode_rows(), sorted by (stream key, file, split, row) -> incidents (dicts in
    stream's schema, `seq` 0 until numbered). offsets[(file, split)]: lines of the file before
    the split."""
    from triage.stream.assemble import Assembler
    from triage.stream.emit import incident_json

    if docs_url:
        from triage.runbook.links import set_docs_url

        set_docs_url(docs_url)
    _, prefilter, classify = tools(rules_dir)
    for key_json, rows in groupby(items, key=lambda row: row[0]):
        key = key_of(key_json)
        files: list[str] = []
        closed: list = []
        assembler = Assembler(prefilter, limits, closed.append)
        for _, path, block, row, text, when, partial_line in rows:
            if not files or files[-1] != path:
                files.append(path)
            no = (len(files) - 1) << FILE_SHIFT | (offsets.get((path, block), 0) + row)
            assembler.add(Record(key, text, None if when is None else json.loads(when), partial_line), no, None, 0.0)
            if closed:
                yield from _incidents(closed, files, classify, incident_json)
        assembler.finish(0.0)
        yield from _incidents(closed, files, classify, incident_json)


def _incidents(closed: list, files: list[str], classify, incident_json) -> Iterator[dict]:
    for window in closed:
        data = incident_json(window, 0, classify)
        if data is None:
            continue
        lines = data["lines"]
        first, last = window.first_no, window.last_no
        lines["first"], lines["last"] = first & _LINE, last & _LINE
        data["files"] = {"first": files[first >> FILE_SHIFT], "last": files[last >> FILE_SHIFT]}
        yield data
    closed.clear()


def job(incident: dict) -> str:
    """The summary's job: the file of a plain log, else the stream key's values joined by '/'
    (namespace/pod/container/host for Kubernetes shippers, the label values for Loki)."""
    stream = incident["stream"]
    if set(stream) == {FILE_FIELD}:
        return stream[FILE_FIELD]
    return "/".join(str(v) for v in stream.values())


def day(incident: dict) -> str | None:
    """The UTC day of the incident's first time (the record's, else the first the lines print)."""
    first = (incident.get("time") or {}).get("first")
    if not first:
        return None
    if _DAY.match(first):
        text = first.replace("Z", "+00:00").replace(",", ".")
        try:
            when = dt.datetime.fromisoformat(text)
        except ValueError:
            return first[:10]
        if when.tzinfo is not None:
            when = when.astimezone(dt.timezone.utc)
        return when.strftime("%Y-%m-%d")
    return None


def order(incident: dict) -> tuple:
    """How incidents are numbered (seq): by where they start, then by stream."""
    return (incident["files"]["first"], incident["lines"]["first"], json.dumps(incident["stream"], sort_keys=True))
