"""/export FILE: the incident as a Markdown report, for the ticket or the postmortem.

The log excerpt (the deciding lines marked `>>`), the facts of the load, every hypothesis
with its status on the checkpoint, the probe results, the verdict, the fix, and the
commands run from the chat with their output.
"""

from __future__ import annotations

import datetime

from triage import __version__
from triage.chat import replies
from triage.chat.reply import Reply, reply
from triage.chat.session import FACTS, LABELS, Session

CONTEXT_BEFORE, CONTEXT_AFTER, MAX_EXCERPT = 8, 3, 40


def cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def fence(lines: list[str]) -> list[str]:
    ticks = "````" if any(line.lstrip().startswith("```") for line in lines) else "```"
    return [ticks + "text"] + lines + [ticks]


def excerpt(log: str, marked: set[int]) -> list[str]:
    """The log lines around the deciding ones, numbered, the deciding ones marked `>>`.

    Deciding lines can be far apart (a job log's save line and, hundreds of lines on, the
    traceback): each gets its own window, windows that touch are merged, and `...` stands for
    the lines between. Past MAX_EXCERPT lines the context shrinks; the deciding lines stay."""
    lines = log.splitlines()
    marked = {n for n in marked if 1 <= n <= len(lines)}
    if not marked:
        return []
    before, after = CONTEXT_BEFORE, CONTEXT_AFTER
    while True:
        spans: list[list[int]] = []
        for n in sorted(marked):
            start, end = max(1, n - before), min(len(lines), n + after)
            if spans and start <= spans[-1][1] + 1:
                spans[-1][1] = max(spans[-1][1], end)
            else:
                spans.append([start, end])
        if sum(end - start + 1 for start, end in spans) <= MAX_EXCERPT or before + after == 0:
            break
        before, after = max(0, before - 2), max(0, after - 1)
    width = len(str(spans[-1][1]))
    out: list[str] = []
    for start, end in spans:
        if out or start > 1:
            out.append(" " * (width + 2) + " ...")
        out += [f"{'>>' if n in marked else '  '}{n:>{width}} | {lines[n - 1]}" for n in range(start, end + 1)]
    return out


def markdown(session: Session, by: str = "chat") -> str:
    ranked = session.ranked()
    t = session.triage
    if t is not None and t.verdict["status"] == "confirmed":
        title = f"{t.verdict['category']}" + (f" [{t.verdict['rule_id']}]" if t.verdict["rule_id"] else "")
    elif ranked:
        title = f"{ranked[0][0].rule.category} [{ranked[0][0].rule.id}] (not confirmed on the checkpoint)"
    else:
        title = "no checkpoint-loading failure recognised"
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = [f"# Incident report: {title}", "", f"Written by `ds-triage {by}` {__version__} on {now}.", "",
           "## The load", ""]
    out += [f"- {LABELS[name]}: {session.describe(name) or 'not given'}" for name in FACTS]
    if session.report is not None:
        out += _log_part(session, ranked)
    if t is not None or session.probe_report is not None:
        out += _probe_part(session)
    if ranked:
        out += _fix_part(session, ranked[0][0])
    out += ["", "## Commands run", ""]
    if not session.commands:
        out.append("None from the chat.")
    for run in session.commands:
        status = "stopped" if run.returncode is None else f"exit status {run.returncode}"
        out += [f"`{run.command}` ({status}{', output cut' if run.truncated else ''}):", ""]
        out += fence(run.output.rstrip("\n").splitlines() or ["(no output)"]) + [""]
    return "\n".join(out).rstrip("\n") + "\n"


def _log_part(session: Session, ranked) -> list[str]:
    out = ["", "## Error", ""]
    error = replies.error_line(session)
    out.append(f"`{error}`" if error else "No Python exception in the log.")
    if ranked:
        top = ranked[0][0]
        marked = {e.line for e in top.evidence if e.line}
        lines = excerpt(session.log, marked)
        if lines:
            out += ["", "## Log excerpt", "", f"The lines that decided {top.rule.id} are marked `>>`.", ""]
            out += fence(lines)
    out += ["", "## Hypotheses", "", "| # | rule | category | confidence | on the checkpoint | why |",
            "|---:|---|---|---:|---|---|"]
    for number, (h, decision) in enumerate(ranked, start=1):
        status = f"{decision.status}: {decision.reason}" if decision else "not probed"
        out.append(f"| {number} | {h.rule.id} {cell(h.rule.title)} | {h.rule.category} | {h.confidence:.2f} | "
                   f"{cell(status)} | {cell(replies.why_line(h))} |")
    return out


def _probe_part(session: Session) -> list[str]:
    t = session.triage
    probe = t.probe if t is not None else session.probe_report
    out = ["", "## Probe results", "", f"Checkpoint: `{probe.ctx.ckpt.root or probe.ctx.ckpt.given}`"
           + (f", tag `{probe.ctx.ckpt.tag}`" if probe.ctx.ckpt.tag else ""), "",
           "| probe | status | summary |", "|---|---|---|"]
    out += [f"| {r.name} | {r.status} | {cell(r.summary)} |" for r in probe.results.values()]
    for r in probe.results.values():
        if r.status != "refuted" and r.evidence:
            out += ["", f"{r.name}:", ""] + [f"- {cell(line)}" for line in r.evidence]
    if t is not None:
        v = t.verdict
        out += ["", "## Verdict", "", f"**{v['category']}**" + (f" ({v['rule_id']})" if v["rule_id"] else "")
                + f", {v['status']}: {v['reason']}"]
    return out


def _fix_part(session: Session, h) -> list[str]:
    out = ["", f"## Fix ({h.rule.id})", ""]
    for index, step in enumerate(h.rule.data["fix"], start=1):
        out.append(f"{index}. {step['title']} ({replies.safety(step)})")
        if step.get("detail"):
            out.append(f"   {step['detail']}")
    repairs = replies.repair_commands(session, h)
    if repairs:
        out += ["", f"Repairs ({replies.REPAIR_NOTE}):", ""] + ["```sh"] + repairs + ["```"]
    return out


def report_markdown(rules, log: str, report, triage=None, given: dict | None = None, by: str = "classify") -> str:
    """The same report for `classify` / `triage --format markdown`: one incident, no chat."""
    session = Session(rules, given=dict(given or {}))
    session.log, session.report, session.triage = log, report, triage
    return markdown(session, by)


def write_report(session: Session, path: str) -> Reply:
    text = markdown(session)
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        return reply(f"error: cannot write {path}: {exc.strerror or exc}")
    return reply(f"Wrote the incident report to {path} ({text.count(chr(10))} lines).")
