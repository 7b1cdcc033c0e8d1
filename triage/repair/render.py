"""Terminal output of `ds-triage repair`: the plan, then (with --apply) what was done and verified."""

from __future__ import annotations

from triage.classify.render import Style
from triage.repair import registry
from triage.repair.apply import Outcome


def _section(title: str, lines: list[str], out: list[str], bullet: str = "- ") -> None:
    if lines:
        out.append(f"{title}:")
        out += [f"  {bullet}{line}" for line in lines]


def render(outcome: Outcome, style: Style | None = None) -> str:
    style = style or Style(False)
    p = outcome.plan
    out = [style(f"repair {p.action}: {registry.summary(p.action)}", "1"),
           f"checkpoint: {p.root}" + (f"  tag: {p.tag}" if p.tag else "")]
    _section("reads", p.reads, out, "")
    _section("writes (new)", p.writes, out, "")
    _section("replaces (in place)", p.replaces, out, "")
    _section("backups", p.backups, out, "")
    _section("runs", p.shown_commands(), out, "$ ")
    out.append("steps:")
    out += [f"  {n}. {s}" if not s.startswith("  ") else f"     {s.strip()}" for n, s in enumerate(p.steps, 1)]
    _section("notes", p.notes, out)
    diff = p.data.get("diff")
    if diff:
        out.append("diff:")
        out += [f"  {line}" for line in diff.rstrip("\n").splitlines()]
    if not outcome.applied:
        _section("how to load the result", p.how_to_load, out)
        out.append("")
        out.append(style("dry run: nothing was written. Run again with --apply to do it", "1;33")
                   + (", then it is verified by a real DeepSpeed load" if p.load else "") + ".")
        return "\n".join(out) + "\n"
    _section("done", outcome.done, out)
    note = outcome.trust.trusted_note() if outcome.trust else None
    if note:
        out.append(style(note, "1;33"))
    out.append("verification:")
    for c in outcome.checks:
        out.append(f"  {style('ok  ', '32') if c.ok else style('FAIL', '1;31')}  {c.name}: {c.detail}")
    load = outcome.load
    if load is not None:
        mark = style("ok  ", "32") if load.ok else style("FAIL", "1;31")
        out.append(f"  {mark}  real DeepSpeed load ({load.mode}, {load.world_size} rank(s), config from "
                   f"{load.config_source}, {load.seconds:.0f} s): {load.detail}")
        out += [f"        {n}" for n in load.notes]
        out += [f"        | {line}" for line in load.log]
    else:
        out.append(f"  -     real DeepSpeed load: {outcome.load_skipped}")
    if outcome.rolled_back:
        out.append(f"rolled back: {outcome.rolled_back}")
    _section("how to load", p.how_to_load, out)
    out.append("")
    if outcome.ok:
        how = "structure checked; real DeepSpeed load passed" if load is not None else \
            "structure checked; no real DeepSpeed load ran"
        out.append(style(f"summary: repaired: {p.out} ({how})", "1;32"))
    else:
        out.append(style(f"summary: NOT repaired: verification failed" + (
            f"; {p.out} is kept for inspection" if p.staging else ""), "1;31"))
    return "\n".join(out) + "\n"
