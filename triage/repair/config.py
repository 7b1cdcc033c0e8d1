"""repair config: the ds_config that matches the checkpoint, written as a new file, shown as a
unified diff against yours (--config).

Starts from your config (or, without one, the config the checkpoint was saved with) and sets the
settings that decide whether the load works to what was saved: the ZeRO stage, bf16/fp16, the
tensor- and expert-parallel degrees, pipeline stages, `checkpoint.load_universal` (true only for a converted
checkpoint) and ZeRO-3's unsupported `elastic_checkpoint`. Everything else (batch sizes,
optimizer, scheduler) stays yours. The world size is not a ds_config setting: the plan says it.
"""

from __future__ import annotations

import copy
import difflib
import json
import os

from triage.probe import checks
from triage.probe.checks.config import lookup
from triage.probe.context import ProbeContext
from triage.probe.result import REFUTED
from triage.probe.target import Target, read_config
from triage.repair import files
from triage.repair.plan import Check, LoadSpec, Plan, Source, new_path, refuse_inside

NAME = "config"
MISSING = object()


def _set(config: dict, dotted: str, value) -> None:
    node = config
    *parents, last = dotted.split(".")
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    if value is MISSING:
        node.pop(last, None)
    else:
        node[last] = value


def wanted(layout, saved: dict) -> list[tuple[str, object, str]]:
    """(dotted setting, value the checkpoint needs, why) for the settings that decide the load."""
    out = []
    if layout.stage is not None:
        out.append(("zero_optimization.stage", layout.stage, f"saved with ZeRO-{layout.stage} ({layout.stage_source})"))
    bf16, fp16 = bool(lookup(saved, "bf16.enabled", False)), bool(lookup(saved, "fp16.enabled", False))
    if layout.bf16 and not bf16:
        bf16 = True  # the shard names say bf16 (bf16_zero_pp_rank_*) even if the saved config did not
    out.append(("bf16.enabled", bf16, "saved " + ("with" if bf16 else "without") + " bf16"))
    out.append(("fp16.enabled", fp16, "saved " + ("with" if fp16 else "without") + " fp16"))
    tp = lookup(saved, "tensor_parallel.autotp_size", None)
    if not isinstance(tp, int) and (layout.tp or 1) > 1:
        tp = layout.tp
    for dotted, value, what in (("tensor_parallel.autotp_size", tp, "tensor-parallel degree"),
                                ("expert_parallel.autoep_size", lookup(saved, "expert_parallel.autoep_size", None),
                                 "expert-parallel degree"),
                                ("pipeline.stages", lookup(saved, "pipeline.stages", None), "pipeline stages")):
        if isinstance(value, int) and not isinstance(value, bool):
            out.append((dotted, value, f"saved with {what} {value}"))
    out.append(("checkpoint.load_universal", True if layout.names.universal else MISSING,
                "a converted (universal) checkpoint" if layout.names.universal else
                "not a universal checkpoint: load_universal would look for zero/ folders that are not there"))
    if layout.stage == 3:
        out.append(("zero_optimization.elastic_checkpoint", MISSING, "ZeRO-3 does not support elastic checkpoints"))
    return out


def _text(config: dict) -> str:
    return json.dumps(config, indent=2) + "\n"


def plan(source: Source, options) -> Plan:
    tag = source.require_tag()
    layout = source.layout()
    saved = layout.ds_config or {}
    if options.config:
        base, label = read_config(options.config), options.config
    else:
        base, label = copy.deepcopy(saved), "the saved ds_config"
    new = copy.deepcopy(base)
    changes = []
    for dotted, value, why in wanted(layout, saved):
        before = lookup(base, dotted, MISSING)
        if value is False and before is MISSING:
            continue  # unset is already off
        if before is not MISSING and before == value or (value is MISSING and before is MISSING):
            continue
        _set(new, dotted, value)
        changes.append(f"{dotted}: {'unset' if before is MISSING else json.dumps(before)} -> "
                       f"{'removed' if value is MISSING else json.dumps(value)} ({why})")
    default = os.path.normpath(source.root) + "-ds_config.json"
    out = new_path(options.out or default, "--out")
    refuse_inside(out, source)
    p = Plan(action=NAME, root=source.root, tag=tag, out=out)
    p.reads = [source.tag_dir] + ([options.config] if options.config else [])
    p.writes = [out]
    p.steps = [f"write {out}: {label} with {len(changes)} setting(s) changed" if changes else
               f"write {out}: {label} already matches the checkpoint"] + [f"  {c}" for c in changes]
    world = options.world_size or layout.world_size or 1
    p.notes.append(f"run the load on {layout.world_size or '?'} rank(s) (dp {layout.dp or '?'} x mp {layout.mp or 1}), "
                   "as saved; for another world size use `ds-triage repair universal`")
    p.data.update(config=new, diff="".join(difflib.unified_diff(
        _text(base).splitlines(keepends=True), _text(new).splitlines(keepends=True),
        fromfile=options.config or f"{tag} (saved ds_config)", tofile=out)), changes=changes)
    p.load = LoadSpec(mode="resume", load_dir=source.root, tag=tag, world_size=world, config=new,
                      config_source=out)
    p.how_to_load = [f"deepspeed.initialize(..., config={out!r}), then engine.load_checkpoint({source.root!r}, "
                     f"tag={tag!r})"]
    return p


def execute(plan: Plan, staging: str | None) -> list[str]:
    tmp = f"{plan.out}.ds-triage-partial"
    files.atomic_write(tmp, _text(plan.data["config"]))
    files.publish(tmp, plan.out)
    return [f"wrote {plan.out}"]


def structural(plan: Plan) -> list[Check]:
    with open(plan.out, encoding="utf-8") as f:
        config = json.load(f)
    ctx = ProbeContext.for_path(os.path.join(plan.root, plan.tag), Target(config=config, config_path=plan.out))
    result = checks.run(ctx, ("config",))["config"]
    return [Check("probe config", result.status == REFUTED,
                  result.summary if result.status == REFUTED else (result.headline or [result.summary])[0])]
