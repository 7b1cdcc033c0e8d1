"""The text of the chat's answers, from the session's classification and verdict.

Hypotheses are numbered as currently ranked (the verdict's order once probed); /why N,
/fix N and /run N take those numbers. Nothing here decides anything: the ranking is
`classify`'s, the statuses are `triage`'s (triage.probe.report), the commands the rules'.
"""

from __future__ import annotations

import shlex

from triage.chat import readonly
from triage.chat.session import FACTS, LABELS, Session
from triage.classify.render import Style
from triage.logs.inputs import TRUNCATED_NOTE
from triage.probe import CONFIRMED, INCONCLUSIVE, REFUTED

MAX_EVIDENCE = 6
STATUS = {CONFIRMED: ("confirmed", "1;31"), REFUTED: ("ruled out", "32"), INCONCLUSIVE: ("open", "33")}


def error_line(session: Session) -> str | None:
    """The same `raised:` line `classify` prints (the exception, where, which ranks)."""
    from triage.classify.render import render_report

    first = render_report(session.report).splitlines()[0]
    return first if first.startswith("raised:") else None


def why_line(h) -> str:
    """One line of why: the first deciding log line and the pattern that read it."""
    if not h.evidence:
        return h.rule.data["summary"]
    e = h.evidence[0]
    where = f"line {e.line} " if e.line else ""
    text = f"`{e.text.strip()[:100]}`" if e.text.strip() else ""
    return f"{where}{text}: {e.why.split(': ', 1)[0]}" if where or text else e.why


def headline(h, number: int) -> str:
    category = "not a checkpoint-loading failure" if h.rule.category == "unknown" else h.rule.category
    return f"{number}. {h.rule.id} {category} ({h.confidence:.2f}): {h.rule.title}"


def causes(session: Session, style: Style) -> list[str]:
    report = session.report
    out = [line for line in [error_line(session)] if line]
    if report.incident.truncated:
        out.append(TRUNCATED_NOTE)
    if not report.hypotheses:
        out.append(style("No checkpoint-loading failure recognised in this log (category: unknown).", "1"))
        out.append("/runbook WORDS searches the rules by what the error says; /rules lists them.")
        return out
    out.append(style("Likely causes, best first:", "1"))
    for number, (h, _) in enumerate(session.ranked(), start=1):
        out.append(style(f"  {headline(h, number)}", "1;33" if number == 1 else "33"))
        out.append(f"     why: {why_line(h)}")
    known = [f"{LABELS[n]} {session.describe(n)}" for n in ("stage", "world_size", "config")
             if session.describe(n) and n not in session.facts]
    if known:
        out.append("From the log: " + "; ".join(known) + ".")
    return out


def verdict(session: Session, style: Style) -> list[str]:
    t = session.triage
    v = t.verdict
    out = [f"Probed {t.probe.ctx.ckpt.root or t.probe.ctx.ckpt.given}" + (f" (tag {t.probe.ctx.ckpt.tag})"
                                                                          if t.probe.ctx.ckpt.tag else "")]
    layout = t.probe.ctx.layout()
    if layout is not None:
        out[0] += f": saved {layout.describe()}"
    if v["status"] == "likely":
        rule = t.probed[0].hypothesis.rule
        out.append(style(f"Verdict, likely but not confirmed on the checkpoint: {v['category']} [{v['rule_id']}] "
                         f"{rule.title}", "1;33"))
    elif v["rule_id"]:
        rule = t.probed[0].hypothesis.rule
        out.append(style(f"Verdict: {v['category']} [{v['rule_id']}] {rule.title}", "1;31"))
    elif v["category"] != "unknown":
        out.append(style(f"Verdict: {v['category']} (found by the probes; no rule recognised how the log "
                         "reports it)", "1;31"))
        out.append(f"  {v['reason']}")
    else:
        out.append(style("Verdict: unknown: no cause from the log was confirmed on the checkpoint.", "1;33"))
    results = t.probe.results
    groups = {CONFIRMED: [], INCONCLUSIVE: [], REFUTED: []}
    for number, p in enumerate(t.probed, start=1):
        groups[p.decision.status].append((number, p))
    for status in (CONFIRMED, REFUTED, INCONCLUSIVE):
        if not groups[status]:
            continue
        label, code = STATUS[status]
        out.append(style(f"{label.capitalize()}:", code))
        for number, p in groups[status]:
            out.append(f"  {headline(p.hypothesis, number)}")
            out += [f"     {line}" for line in _decided_by(p, results, status)]
    return out


def _decided_by(p, results, status: str) -> list[str]:
    """The probe lines that decided a hypothesis: what was found, or what came back clear."""
    lines: list[str] = []
    for name in p.probe_names:
        r = results.get(name)
        if r is None or not any(s.startswith(f"{name}.") for s in p.decision.signals):
            continue
        if status == CONFIRMED:
            lines += [f"{status}: {line}" for line in r.headline[:3]]
            if r.command:
                lines.append(f"$ {r.command}")
        elif r.status == REFUTED:
            lines.append(f"{name}: {r.summary}")
        else:  # the probe found something else: say what it found clear for this cause
            clear = [s.split(".", 1)[1].replace("_", " ") for s in p.decision.signals if s.startswith(f"{name}.")]
            lines.append(f"{name}: checked, no {', no '.join(clear)}")
    return lines or [p.decision.reason]


def evidence(session: Session, number: int) -> list[str]:
    """/why N: every deciding line of the log, and the probes' results for the hypothesis."""
    h, decision = session.ranked()[number - 1]
    out = [headline(h, number), f"  {h.rule.data['summary']}", "  From the log:"]
    for e in h.evidence[:MAX_EVIDENCE]:
        where = f"line {e.line}: " if e.line else ""
        out.append(f"    > {where}{e.text.strip()}" if e.text.strip() else f"    > {e.why}")
        out.append(f"      ({e.why})")
    if decision is None:
        out.append("  Not probed yet: /probe checks it on the checkpoint.")
        return out
    out.append(f"  On the checkpoint: {STATUS[decision.status][0]}: {decision.reason}")
    results = session.triage.probe.results
    for name in next(p for p in session.triage.probed if p.hypothesis is h).probe_names:
        r = results.get(name)
        if r is not None:
            out.append(f"    {name}: {r.status}: {r.summary}")
            out += [f"      > {line}" for line in r.evidence[:MAX_EVIDENCE]]
    return out


def fix(session: Session, number: int, style: Style) -> list[str]:
    """/fix N: the rule's fix steps with their safety, then its repairs as dry-run commands."""
    h, _ = session.ranked()[number - 1]
    out = [style(f"Fix for {h.rule.id} ({h.rule.title}):", "1")]
    for index, step in enumerate(h.rule.data["fix"], start=1):
        out.append(f"  {index}. {step['title']} [{safety(step)}]")
        if step.get("detail"):
            out.append(f"     {step['detail']}")
    repairs = repair_commands(session, h)
    if repairs:
        out.append(style(f"Repairs ({REPAIR_NOTE}):", "1"))
        out += [f"  $ {line}" for line in repairs]
    return out


REPAIR_NOTE = "dry runs: they show what they would write; /repair ACTION plans one here and asks before applying"


def repair_commands(session: Session, h) -> list[str]:
    """The rule's repair actions as `ds-triage repair ACTION CKPT` dry-run commands."""
    ckpt = session.report.facts.get("ckpt") if session.report else None
    where = shlex.quote(ckpt) if ckpt else '"$CKPT"'
    return [f"ds-triage repair {action} {where}" for action in h.rule.data.get("repairs", [])]


def safety(step: dict) -> str:
    return "safe" if step["safety"] == "safe" else f"UNSAFE: {step.get('why', '')}"


def steps(session: Session, style: Style, rule_id: str | None = None) -> list[str]:
    """The verification commands, numbered for /run; each marked runnable here or copy-only. One whose
    output was pasted already is not offered again: it is named at the end, with the paste."""
    out, answered, ctx = [], [], readonly.Context.of(session)
    for step in session.steps():
        if rule_id and step.rule_id != rule_id:
            continue
        pasted = answered_by(step.command, session)
        if pasted is not None:
            answered.append(f"  [{step.number}] {step.command}: {pasted.label()}")
            continue
        why = readonly.check(step.command, ctx)
        mark = f"/run {step.number}" if why is None else "copy it"
        out.append(f"  [{step.number}] {step.command}")
        out.append(style(f"      {step.shows} ({step.rule_id}; {mark})", "2"))
    if answered:
        out += ["Already answered by what you pasted (not asked again):"] + answered
    return out


# the kind of pasted evidence (triage/evidence/) each program's output is read as
PRINTS = {"ls": "listing", "find": "listing", "tree": "listing", "du": "listing", "stat": "listing",
          "id": "identity", "whoami": "identity", "namei": "namei", "findmnt": "mounts", "mount": "mounts",
          "pip": "versions", "pip3": "versions", "ds_report": "versions", "free": "memory", "nvidia-smi": "gpus",
          "dmesg": "oom"}


def answered_by(command: str, session: Session):
    """The pasted evidence that already holds `command`'s output (its kind), or None."""
    words = command.split()
    kind = PRINTS.get(words[0]) if words else None
    if words[:1] == ["cat"] and words[-1].strip("'\"").endswith("/latest"):
        kind = "latest"
    elif words[:1] == ["head"] and "-c" in words:
        kind = "head"
    elif words[:1] == ["grep"] and ('"$DS_CONFIG"' in command or (session.facts.get("config") or "\0") in command):
        kind = "config"
    elif words[:1] in (["python"], ["python3"]) and "__version__" in command:
        kind = "versions"
    return next((item for item in session.evidence if item.kind == kind), None)


def facts(session: Session) -> list[str]:
    out = []
    for name in FACTS:
        shown = session.describe(name)
        note = " (skipped)" if name in session.skipped else ""
        out.append(f"  {LABELS[name]:11s} {shown or 'not given'}{note}")
    return out


def evidence_line(item) -> str:
    """What a pasted output was read as, in a few words."""
    facts = item.facts
    if item.kind == "listing":
        return f"{item.label()}: {len(facts['entries'])} paths"
    shown = ", ".join(f"{k} {v}" for k, v in facts.items() if isinstance(v, (str, int)) and v is not None)
    return f"{item.label()}" + (f" ({shown})" if shown else "")


def changes(session: Session, before: dict) -> list[str]:
    """What the evidence changed in the ranking: each cause whose status moved."""
    out = []
    for number, (h, decision) in enumerate(session.ranked(), start=1):
        now = decision.status if decision else None
        was = STATUS[before[h.rule.id]][0] if before.get(h.rule.id) else "open"
        if now is not None and was != STATUS[now][0]:
            out.append(f"  {h.rule.id}: {was} -> {STATUS[now][0]}")
    return (["What changed:"] + out) if out else ["Nothing changed in the ranking."]


def command_run(run) -> list[str]:
    out = [f"$ {run.command}"]
    out += [f"  {line}" for line in run.output.rstrip("\n").splitlines()] or ["  (no output)"]
    if run.truncated:
        out.append(f"  (output cut at {readonly.MAX_OUTPUT // 1024} KiB; the command was stopped)")
    elif run.returncode is None:
        out.append(f"  (stopped after {readonly.TIMEOUT:g} s)")
    elif run.returncode:
        out.append(f"  (exit status {run.returncode})")
    return out
