"""repair latest: point `latest` at the newest complete tag.

Complete as the probe layer says: for each tag, newest first, the completeness probe (every
shard its saved degrees require) and the integrity probe (every shard a whole archive) must find
nothing. The one edit in place ds-triage makes: the old `latest` is copied to
`latest.bak-<timestamp>` first, the new one written to a temporary file and os.replace'd over;
if verification fails the old content is put back.
"""

from __future__ import annotations

import os

from triage.probe import checks, confine
from triage.probe.checkpoint import step_key
from triage.probe.context import ProbeContext
from triage.probe.result import CONFIRMED, REFUTED
from triage.repair import files
from triage.repair.engine_config import config_for_check
from triage.probe import trust
from triage.repair.gate import TRUST_SIGNALS
from triage.repair.plan import Check, LoadSpec, Plan, Refused, Source

NAME = "latest"
GATE = ("completeness", "integrity")


def tag_problems(root: str, tag: str, trusted: bool = False) -> list[str]:
    """Why `tag` is not complete ([] when it is). A tag the trust gate cannot verify is never chosen
    (unless --trust-checkpoint): the job's next load would run or read its files."""
    results = checks.run(ProbeContext.for_path(os.path.join(root, tag)), GATE)
    problems = [f"{r.name}: {(r.headline or [r.summary])[0]}" for r in results.values()
                if r.status == CONFIRMED and not (trusted and set(r.signals) <= TRUST_SIGNALS)]
    if not trusted:
        scanned = trust.scan(os.path.join(root, tag), root)
        problems += [f"trust: {scanned.describe(1)}"] if scanned.untrusted else []
    if not problems and results["completeness"].status != REFUTED:
        problems.append(f"completeness: {results['completeness'].summary}")
    return problems


def plan(source: Source, options) -> Plan:
    if options.out:
        raise Refused("--out does not apply to `repair latest`: it replaces CKPT/latest in place (after a backup)")
    ckpt = source.ctx.ckpt
    root = ckpt.root
    latest_path = os.path.join(root, "latest")
    current = ckpt.latest.text if ckpt.latest and ckpt.latest.exists else None
    if ckpt.latest and ckpt.latest.refused:
        raise Refused(f"{latest_path}: not read ({ckpt.latest.refused}); remove it, then run `repair latest` again")
    if ckpt.latest and ckpt.latest.error:
        raise Refused(f"{latest_path}: cannot read it ({ckpt.latest.error}); fix its permissions first")
    candidates = [options.tag] if options.tag else sorted(ckpt.tags, key=step_key, reverse=True)
    if not candidates:
        raise Refused(f"{root}: no tag dir holds DeepSpeed shards: nothing for `latest` to name")
    p = Plan(action=NAME, root=root, tag=None, out=latest_path)
    chosen = None
    for tag in candidates:
        problems = tag_problems(root, tag, options.trust_checkpoint)
        p.reads.append(os.path.join(root, tag))
        if not problems:
            chosen = tag
            break
        p.notes.append(f"{tag}: skipped, not complete ({problems[0]})")
    if chosen is None:
        raise Refused(f"{root}: no complete tag to point `latest` at; " + "; ".join(p.notes))
    p.tag = chosen
    p.data["previous"] = current
    if current == chosen:
        p.steps.append(f"`latest` already names {chosen!r}, the newest complete tag: nothing to change")
    else:
        was = f"names {current!r}" if current is not None else "is missing"
        if current is not None:
            p.backups.append(files.backup_path(latest_path))
            p.steps.append(f"copy {latest_path} to {p.backups[0]}")
            p.reads.insert(0, latest_path)
        p.steps.append(f"write {chosen!r} to {latest_path}.tmp-<pid>, fsync, os.replace it over `latest` "
                       f"(it {was})")
        (p.replaces if current is not None else p.writes).append(latest_path)
    layout = ProbeContext.for_path(os.path.join(root, chosen)).layout()
    world = options.world_size or (layout.world_size if layout else None) or 1
    tagged = Source(ProbeContext.for_path(os.path.join(root, chosen)), source.given)
    config, label, notes = config_for_check(tagged, options, world)
    p.notes += notes
    p.load = LoadSpec(mode="resume", load_dir=root, tag=None, world_size=world, config=config, config_source=label)
    p.how_to_load.append(f"engine.load_checkpoint({root!r}) now loads {chosen} (model, optimizer and scheduler state)")
    return p


def execute(plan: Plan, staging: str | None) -> list[str]:
    if plan.data["previous"] == plan.tag:
        return []
    if plan.backups:
        files.backup(plan.out, plan.backups[0])
    files.atomic_write(plan.out, plan.tag)
    return [f"`latest` now names {plan.tag!r}" + (f" (was {plan.data['previous']!r}; backup {plan.backups[0]})"
                                                  if plan.backups else "")]


def rollback(plan: Plan) -> str:
    """Put the old `latest` back (its content; the backup stays)."""
    if plan.data["previous"] == plan.tag:
        return ""
    if plan.data["previous"] is None:
        os.remove(plan.out)
        return f"removed the new {plan.out} again (there was none before)"
    files.atomic_write(plan.out, plan.data["previous"])
    return f"restored {plan.out} to {plan.data['previous']!r}"


def structural(plan: Plan) -> list[Check]:
    results = checks.run(ProbeContext.for_path(plan.root), ("latest",) + GATE)
    out = []
    for name, r in results.items():
        ok = r.status == REFUTED
        out.append(Check(f"probe {name}", ok, r.summary if ok else (r.headline or [r.summary])[0]))
    with confine.open_regular(plan.out, plan.root, "r") as f:
        text = f.read(4096).strip()
    out.append(Check("latest names the tag", text == plan.tag, f"`latest` reads {text!r}"))
    return out
