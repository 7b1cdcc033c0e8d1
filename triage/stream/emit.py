"""A closed incident window -> one JSON object (docs/schemas/stream.schema.json), or None.

The window's text goes through the same `classify` as a pasted log; a window in which the
classifier finds nothing (no exception, no launcher failure, no rule) was chatter that
happened to hold a trigger word, and produces no output.
"""

from __future__ import annotations

import re
from typing import Callable

from triage.classify.report import Report
from triage.logs.tracebacks import TRACEBACK
from triage.stream.assemble import Window
from triage.stream.records import time_text

SCHEMA_VERSION = 1
_TIMESTAMP = re.compile(r"\[?(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)")


def excerpt_lines(window: Window) -> list[str]:
    """What is classified and shown: remembered context lines, then the incident's own lines."""
    lines = window.context + window.head
    if window.omitted:
        lines.append(f"[ds-triage: {window.omitted} lines omitted]")
    lines.extend(window.tail)
    return lines


def is_incident(report: Report, text: str = "") -> bool:
    """Something failed: an exception, a launcher's failure, a rule; or a traceback that was cut
    before its exception line (the input ended, the process died mid-print)."""
    incident = report.incident
    return bool(report.hypotheses or incident.chains or any(incident.exit_codes.values())
                or TRACEBACK in text)


def incident_json(window: Window, seq: int, classify: Callable[..., Report]) -> dict | None:
    lines = excerpt_lines(window)
    text = "\n".join(lines)
    report = classify(text, truncated=window.truncated, decode_errors=text.count("\ufffd"))
    if not is_incident(report, text):
        return None
    first, last = time_text(window.first_time), time_text(window.last_time)
    if first is None:
        first, last = _text_times(window)
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "incident",
        "seq": seq,
        "stream": dict(window.key),
        "lines": {"first": window.first_no, "last": window.last_no, "count": window.lines},
        "time": {"first": first, "last": last} if first else None,
        "closed_by": window.closed_by,
        "excerpt": {
            "text": text,
            "lines": len(lines),
            "context_lines": len(window.context),
            "omitted_lines": window.omitted,
            "cut_lines": window.cut_lines,
            "truncated": window.truncated,
        },
        "classification": report.to_json(),
    }


def _text_times(window: Window) -> tuple[str | None, str | None]:
    """Plain lines carry no record time: take the first and last timestamp the lines print."""
    own = window.head + list(window.tail)
    first = next((m.group(1) for line in own if (m := _TIMESTAMP.match(line))), None)
    last = next((m.group(1) for line in reversed(own) if (m := _TIMESTAMP.match(line))), None)
    return first, last
