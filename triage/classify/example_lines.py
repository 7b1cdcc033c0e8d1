"""The deciding lines of a rule's first positive example, as printed in that log.

Shown under Symptoms on the runbook page and the docs page: what the failure looks like
in a real log, found by running the rule on its own example (`triage.classify.match`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from triage.kb.model import Rule
from triage.logs.normalize import ANSI

EXAMPLE_LINE_CHARS = 300
EXAMPLE_LINES = 6  # deciding lines shown from an example
MESSAGE_LINES = 3  # continuation lines of a multi-line message shown


@dataclass(frozen=True)
class Example:
    source: str  # the corpus file (from the repository root) or "inline example #N"
    link: str | None  # the file, for a link
    lines: tuple[str, ...]  # the deciding lines as printed in the log


def example_error(rule: Rule, root: str | Path) -> Example | None:
    """The lines the rule fires on in its first positive example, as they stand in the log:
    the exception line and the frame that places it, or the log line a `line` pattern found."""
    from triage.classify.match import LogView, score
    from triage.logs.parse import parse

    for index, spec in enumerate(rule.data["examples"]):
        if spec["expect"] != "match":
            continue
        if "file" in spec:
            try:
                text = (Path(root) / spec["file"]).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            source, link = spec["file"], spec["file"]
        else:
            text, source, link = spec["log"], f"inline example #{index + 1} in the rule", None
        incident, lines = parse(text)
        hypothesis = score(rule, LogView(incident, lines))
        if hypothesis is None:
            continue
        raw = text.splitlines()
        numbers = {e.line for e in hypothesis.evidence if e.line and e.text and 0 < e.line <= len(raw)}
        for chain in incident.chains:  # a message of several lines: its next lines too
            for exc in chain.exceptions:
                if exc.log_line in numbers:
                    extra = min(len(exc.message.splitlines()) - 1, MESSAGE_LINES)
                    numbers |= set(range(exc.log_line + 1, min(exc.log_line + 1 + extra, len(raw) + 1)))
        shown = [_cut(ANSI.sub("", raw[n - 1]).expandtabs(4).rstrip()) for n in sorted(numbers)[:EXAMPLE_LINES]]
        if shown:
            return Example(source, link, tuple(shown))
    return None


def _cut(line: str) -> str:
    return line if len(line) <= EXAMPLE_LINE_CHARS else line[:EXAMPLE_LINE_CHARS - 3] + "..."
