"""Closed windows -> incidents in stream's schema, where they are, and how they are summed up.

Each closed window goes through the stream's own incident_json (emit.py: classify, the same
JSON). A fresh assembler per file (files.py) or per stream (streams.py): the input is
complete, so a stream's last incident closes when its records end ("end-of-input"), never by
the wall clock ("idle").

What differs from `stream` is only where a line is: a stream may span files (a shipper's
hourly objects), so `lines.first` / `lines.last` are line numbers in `files.first` /
`files.last`: the assembler's line numbers are (file index << 40 | line in the file).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from functools import partial
from typing import Iterator

from triage.stream.records import Key

FILE_FIELD = "file"  # the stream key of a record that names no stream: its file

FILE_SHIFT = 40  # lines a file may have: 2**40
_LINE = (1 << FILE_SHIFT) - 1
_DAY = re.compile(r"\d{4}-\d\d-\d\d")
_RULES: dict = {}  # (rules directory, extra directories) -> (rules, prefilter, classify), once per executor process


def tools(rules_dir: str | None, docs_url: str | None = None, extra: tuple[str, ...] = ()):
    """The rules (those of `rules_dir`, or the bundled set, plus each `extra` directory), their
    prefilter and classify, loaded once per process (an executor's worker)."""
    if docs_url:
        from triage.runbook.links import set_docs_url

        set_docs_url(docs_url)
    key = (rules_dir, extra)
    if key not in _RULES:
        from triage.classify.classifier import classify
        from triage.kb import load_rules
        from triage.stream.prefilter import Prefilter

        rules = load_rules(rules_dir, extra=list(extra))
        _RULES[key] = (rules, Prefilter(rules.rules), partial(classify, rules=rules))
    return _RULES[key]


def incidents(closed: list, files: list[str], classify, key: Key | None = None) -> Iterator[dict]:
    """The incidents of the closed windows (dicts in stream's schema, `seq` 0 until numbered);
    `files`: the files by index; `key`: the stream key to name (a file's own stream: its file)."""
    from triage.stream.emit import incident_json

    for window in closed:
        data = incident_json(window, 0, classify)
        if data is None:
            continue
        lines = data["lines"]
        first, last = window.first_no, window.last_no
        lines["first"], lines["last"] = first & _LINE, last & _LINE
        data["files"] = {"first": files[first >> FILE_SHIFT], "last": files[last >> FILE_SHIFT]}
        if key is not None:
            data["stream"] = dict(key)
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
