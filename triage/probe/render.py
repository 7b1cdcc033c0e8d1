"""Terminal output of `ds-triage probe` and `ds-triage triage`."""

from __future__ import annotations

from triage.probe.report import ProbeReport, TriageReport
from triage.probe.result import CONFIRMED, INCONCLUSIVE, REFUTED
from triage.classify.render import Style

STATUS_STYLE = {CONFIRMED: ("CONFIRMED", "1;31"), REFUTED: ("refuted", "32"), INCONCLUSIVE: ("inconclusive", "33")}


def _header(report: ProbeReport) -> list[str]:
    ckpt = report.ctx.ckpt
    out = []
    if ckpt.root:
        where = f"checkpoint: {ckpt.root}"
        if ckpt.given_kind != "root":
            where += f" (given {ckpt.given}: {ckpt.given_kind.replace('_', ' ')})"
        out.append(where)
        out.append(f"tag: {ckpt.tag or 'none'}" + (f" (from {ckpt.tag_source})" if ckpt.tag else "")
                   + f"; tags: {', '.join(ckpt.tags) or 'none'}")
        layout = report.ctx.layout()
        if layout is not None:
            out.append(f"saved: {layout.describe()}")
    else:
        out.append(f"path: {ckpt.given} ({ckpt.given_kind.replace('_', ' ')})")
    target = report.ctx.target
    parts = [f"{name.replace('_', ' ')} {target.describe(name)}" for name in ("stage", "world_size", "mp", "precision")
             if getattr(target, name) is not None]
    if target.pipeline is not None:
        parts.append(("pipeline engine" + (f", {target.pp} stages" if target.pp else "") if target.pipeline
                      else "no pipeline engine") + f" ({target.sources.get('pipeline', '?')})")
    if target.config_path:
        parts.append(f"config {target.config_path}")
    elif target.config is not None:
        parts.append(f"ds_config printed in {target.sources.get('config', 'the log')}")
    if target.model_path:
        parts.append(f"model {target.model_path}")
    elif target.model_claims:
        parts.append(f"model as torch's load error describes it (the log, line {target.model_claims.line})")
    parts += [f"{name.replace('_', ' ')} {target.describe(name)}" for name in ("optimizer", "param_groups")
              if getattr(target, name) is not None]
    if target.ds_version:
        parts.append(f"deepspeed {target.describe('ds_version')}")
    if target.torch_version:
        parts.append(f"torch {target.describe('torch_version')}")
    if parts:
        out.append("target: " + ", ".join(parts))
    return out


def _probe_lines(result, style: Style, indent: str = "  ", full: bool = True) -> list[str]:
    label, code = STATUS_STYLE[result.status]
    out = [f"{indent}{result.name:13s} {style(f'{label:12s}', code)} {result.summary}"]
    if result.sources:  # where the load's settings this probe compared came from
        out.append(f"{indent}{' ' * 14}from: " + "; ".join(f"{name.replace('_', ' ')} {where}"
                                                          for name, where in result.sources.items()))
    if full or result.status != REFUTED:
        pad = indent + " " * 14
        for line in result.evidence:
            out.append(f"{pad}> {line}")
        if result.command and result.status != REFUTED:
            out.append(style(f"{pad}$ {result.command}", "2"))
    return out


def render_probe(report: ProbeReport, style: Style | None = None) -> str:
    style = style or Style(False)
    out = _header(report)
    out.append("")
    for result in report.results.values():
        out += _probe_lines(result, style, full=False)
    out.append("")
    problems = report.problems
    if not problems:
        undecided = [r.name for r in report.results.values() if r.status == INCONCLUSIVE]
        out.append(style("summary: nothing wrong found", "1;32")
                   + (f" (inconclusive: {', '.join(undecided)})" if undecided else ""))
    else:
        cats = ", ".join(report.findings) or "no rule category"
        out.append(style(f"summary: {len(problems)} probe(s) found a problem ({cats}):", "1;31"))
        for r in problems:
            lines = r.headline[:3] or [r.summary]
            out.append(f"  - {r.name}: {lines[0]}")
            out += [f"    {line}" for line in lines[1:]]
    return "\n".join(out) + "\n"


def _answer(triage: TriageReport):
    """The hypothesis the verdict names (the first probed one when it names none)."""
    rule_id = triage.verdict["rule_id"]
    return next((p.hypothesis for p in triage.probed if p.hypothesis.rule.id == rule_id), triage.probed[0].hypothesis)


def render_triage(triage: TriageReport, style: Style | None = None) -> str:
    style = style or Style(False)
    out = []
    primary = triage.report.incident.primary
    if primary is not None:
        head = primary.message.splitlines()[0][:160] if primary.message else ""
        out.append(f"raised: {primary.type}{': ' + head if head else ''}")
    out += _header(triage.probe)
    v = triage.verdict
    out.append("")
    if v["status"] == "likely":
        top = _answer(triage)
        out.append(style(f"verdict (likely, not confirmed): {v['category']} [{v['rule_id']}] {top.rule.title}",
                         "1;33"))
        out.append(f"  {v['reason']}")
    elif v["rule_id"]:
        top = _answer(triage)
        out.append(style(f"verdict: {v['category']} [{v['rule_id']}] {top.rule.title}", "1;31"))
        out.append(f"  {v['reason']}")
    elif v["category"] != "unknown":
        out.append(style(f"verdict: {v['category']} (found on the checkpoint; no rule matched this log for it)",
                         "1;31"))
        out.append(f"  {v['reason']}")
    else:
        out.append(style(f"verdict: unknown ({v['reason']})", "1;33"))
        extra = [c for c in triage.probe.findings if c not in {p.hypothesis.rule.category for p in triage.probed}]
        if extra:
            out.append(f"  the probes found {', '.join(extra)}, which the log's hypotheses do not name")
    out.append("")
    if not triage.probed:
        out.append("the log matched no rule; probe results:")
    results = triage.probe.results
    for number, p in enumerate(triage.probed, start=1):
        h, d = p.hypothesis, p.decision
        label, code = STATUS_STYLE[d.status]
        line = f"{number}. {label:12s} {h.confidence:.2f}  {h.rule.id}  {h.rule.title} [{h.rule.category}]"
        if d.status == REFUTED:
            line = style(line, "9;2") if style.enabled else f"{number}. x refuted    {h.confidence:.2f}  " \
                f"{h.rule.id}  {h.rule.title} [{h.rule.category}] (struck off)"
        else:
            line = style(line, code)
        out.append(line)
        out.append(f"   {d.reason}")
        for name in p.probe_names:
            r = results.get(name)
            bug = next((b for b in r.known_bugs if b["rule_id"] == h.rule.id), None) if r is not None else None
            if bug is not None:  # a known bug: its releases against the load's and the saving release
                out.append(f"   > {name}: {bug['summary']}")
                continue
            if r is None or not any(sig.startswith(f"{name}.") for sig in d.signals):
                continue
            if d.status == CONFIRMED:
                out += [f"   > {name}: {ev}" for ev in r.headline[:3]]
                if r.command:
                    out.append(style(f"     $ {r.command}", "2"))
            elif r.status == REFUTED:
                out.append(f"   > {name}: {r.summary}")
    out.append("")
    out.append(style("probes:", "1"))
    for r in results.values():
        out += _probe_lines(r, style, full=False)
    if v["rule_id"]:
        top = _answer(triage)
        out.append("")
        out.append(style(f"fix ({top.rule.id}):", "1"))
        for step in top.rule.data["fix"]:
            mark = "" if step["safety"] == "safe" else "  [unsafe: " + step.get("why", "") + "]"
            out.append(f"  - {step['title']}{mark}")
    return "\n".join(out) + "\n"
