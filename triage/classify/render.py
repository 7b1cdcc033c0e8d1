"""Human-readable report for the terminal."""

from __future__ import annotations

import os
import sys

from triage.classify.messages import WEAK
from triage.classify.report import PHASES, Report
from triage.logs.inputs import TRUNCATED_NOTE
from triage.runbook.links import runbook_url

MAX_EVIDENCE = 4
# Below what a raise site's message alone earns: the text fits several causes (a bare
# assertion, a pattern whose frames the paste cut), none confidently.
LOW_CONFIDENCE = WEAK


class Style:
    choice = "auto"  # --color, set once by the command line

    def __init__(self, enabled: bool):
        self.enabled = enabled

    def __call__(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled else text

    @classmethod
    def for_stream(cls, stream) -> "Style":
        return cls(wants_color(cls.choice, stream, os.environ))


def wants_color(choice: str, stream, environ) -> bool:
    """--color always/never decide; auto: NO_COLOR set non-empty (no-color.org) says no, then
    FORCE_COLOR set non-empty (force-color.org) says yes, then a TTY that is not TERM=dumb."""
    if choice != "auto":
        return choice == "always"
    if environ.get("NO_COLOR"):
        return False
    if environ.get("FORCE_COLOR"):
        return True
    return bool(hasattr(stream, "isatty") and stream.isatty() and environ.get("TERM") != "dumb")


def render_brief(report: Report) -> str:
    """-q: the answer in one line: `RULE category: title`, or `unknown`."""
    top = report.top
    if top is None:
        return "unknown: no checkpoint-loading failure recognised\n"
    return f"{top.rule.id} {top.rule.category}: {top.rule.title}\n"


def render_report(report: Report, style: Style | None = None, full: bool = False) -> str:
    """The terminal report; `full` (-v) shows every piece of evidence, not the first MAX_EVIDENCE."""
    style = style or Style(False)
    out: list[str] = []
    incident = report.incident
    primary = incident.primary
    if primary is not None:
        where = primary.frames[-1] if primary.frames else None
        site = f" at {_short(where.file)}:{where.line} in {where.function}" if where else ""
        ranks = next((c.ranks for c in incident.chains if c.final is primary), [])
        who = f" (ranks {', '.join(map(str, ranks))})" if len(ranks) > 1 else (f" (rank {ranks[0]})" if ranks else "")
        head = primary.message.splitlines()[0][:160] if primary.message else ""
        out.append(f"raised: {primary.type}{': ' + head if head else ''}{site}{who}")
    if incident.truncated:
        out.append(TRUNCATED_NOTE)
    if not report.hypotheses:
        out.append(style("no checkpoint-loading failure recognised (category: unknown)", "1"))
        out.extend(_api_history_lines(report, style))
        out.append("If this is a checkpoint-loading failure, `ds-triage rules list` shows the failures ds-triage knows; please report the log.")
        return "\n".join(out) + "\n"
    top = report.top
    verdict = "not a checkpoint-loading failure" if top.rule.category == "unknown" else top.rule.category
    out.append(style(f"diagnosis: {top.rule.title} [{top.rule.id}, {verdict}]", "1"))
    if top.confidence < LOW_CONFIDENCE:
        out.append(style(f"low confidence ({top.confidence:.2f}): this text fits several causes; paste more of the log "
                         "(the traceback's `File ...` lines, the lines before it) to tell them apart", "2"))
    out.append("")
    for number, h in enumerate(report.hypotheses, start=1):
        out.append(style(f"{number}. {h.confidence:.2f}  {h.rule.id}  {h.rule.title}", "1;33" if number == 1 else "33"))
        out.append(f"   category: {h.rule.category}")
        out.append(f"   {h.rule.data['summary']}")
        for evidence in h.evidence if full else h.evidence[:MAX_EVIDENCE]:
            where = f"line {evidence.line}: " if evidence.line else ""
            text = f"{where}{evidence.text}".strip()
            out.append(f"   > {text}" if text else f"   > {evidence.why}")
            if text:
                out.append(style(f"     ({evidence.why})", "2"))
    out.extend(_api_history_lines(report, style))
    out.append("")
    out.append(style("verify, in order (" + " -> ".join(PHASES[:5]) + "):", "1"))
    seen: set[str] = set()  # two causes often share a check (`ls -la` of the tag dir): run it once
    for h in report.in_verification_order():
        for step in report.verify_steps(h):
            if step["command"] in seen:
                continue
            seen.add(step["command"])
            out.append(f"  [{h.rule.id}] {step['command']}")
            out.append(style(f"      {step['shows']}", "2"))
    out.append("")
    out.append(style(f"fix ({top.rule.id}):", "1"))
    for step in top.rule.data["fix"]:
        mark = "" if step["safety"] == "safe" else "  [unsafe: " + step.get("why", "") + "]"
        out.append(f"  - {step['title']}{mark}")
    out.append(f"runbook: {runbook_url(top.rule.id) or f'ds-triage runbook {top.rule.id}'}")
    if report.facts.get("ckpt") is None:
        out.append("")
        out.append("(set CKPT and TAG to your checkpoint directory and tag before running the commands)")
    return "\n".join(out) + "\n"


def _api_history_lines(report: Report, style: Style) -> list[str]:
    """The releases that define the name or keyword the error misses (version skew)."""
    if not report.api_history:
        return []
    return ["", style("api history (DeepSpeed releases, from the committed index):", "1")] + [
        f"  {note['text']}" for note in report.api_history
    ]


def _short(path: str) -> str:
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def write(text: str, stream=None) -> None:
    (stream or sys.stdout).write(text)
