"""repair universal: a universal checkpoint, by DeepSpeed's ds_to_universal, to load on another
data-parallel size (or tensor/pipeline degree) with `"checkpoint": {"load_universal": true}`.

ds_to_universal writes `latest_universal` into the parent of its output folder, so the output
folder is `<out>/<tag>` (inside the staging dir): nothing lands beside the original. ZeRO-1/2
checkpoints that DeepSpeed's engine saved lack `universal_checkpoint_info` (only
Megatron-DeepSpeed writes it); `--inject_missing_state` is passed for them.
"""

from __future__ import annotations

import os

from triage.manifest.hashing import sha256_file
from triage.probe import confine, zipcheck
from triage.probe.layout import STAGE_FAMILY
from triage.probe.target import config_stage
from triage.repair.engine_config import config_for_check
from triage.repair.gate import refuse_unless, require_whole
from triage.repair.plan import Check, LoadSpec, Plan, Source, default_out, new_path, refuse_inside, staging_for
from triage.repair.tools import PYTHON, run_tool

NAME = "universal"
NEEDS = ("torch", "deepspeed")  # what its commands import (triage/probe/deps.py checks before --apply starts)
EXTRACT_WORKERS, MERGE_WORKERS = 4, 2  # ds_to_universal's defaults, capped by the CPUs here


def plan(source: Source, options) -> Plan:
    tag = source.require_tag()
    layout = source.layout()
    refuse_unless(layout.stage_family not in ("0", None), f"{source.tag_dir}: ds_to_universal converts ZeRO "
                  "checkpoints (stage 1-3); this one is "
                  f"{layout.describe()}. A ZeRO-0 checkpoint loads on any data-parallel size as it is")
    refuse_unless(not layout.names.universal, f"{source.tag_dir} is a universal checkpoint already")
    require_whole(source, NAME)
    out = new_path(options.out or default_out(source, NAME), "--out")
    refuse_inside(out, source)
    p = Plan(action=NAME, root=source.root, tag=tag, out=out, staging=staging_for(out))
    cpus = os.cpu_count() or 1
    command = [PYTHON, "-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder", source.tag_dir,
               "--output_folder", os.path.join("{staging}", tag),
               "--num_extract_workers", str(min(EXTRACT_WORKERS, cpus)),
               "--num_merge_workers", str(min(MERGE_WORKERS, cpus))]
    model = (source.ctx.listing.of("model") or source.ctx.listing.of("zero3_model"))[0]
    meta = source.ctx.meta(model.name)
    if layout.stage in (1, 2) and "universal_checkpoint_info" not in meta.top_keys:
        command.append("--inject_missing_state")
        p.notes.append("--inject_missing_state: the model-states file has no universal_checkpoint_info (DeepSpeed's "
                       "engine writes none; only Megatron-DeepSpeed does)")
    p.commands = [command]
    p.reads = [source.tag_dir]
    p.writes = [os.path.join(out, tag, "zero"), os.path.join(out, tag, model.name) + (" ..." if layout.world_size
                                                                                       and layout.stage == 3 else ""),
                os.path.join(out, "latest_universal")]
    p.steps = [f"run DeepSpeed's ds_to_universal on {source.tag_dir}, writing {p.staging}/{tag}",
               f"rename {p.staging} to {out}"]
    world = options.world_size or layout.world_size or 1
    config, label, notes = config_for_check(source, options, world)
    config["checkpoint"] = dict(config.get("checkpoint") or {}, load_universal=True)
    p.notes += notes
    target_stage = config_stage(config)
    if target_stage is not None and layout.stage is not None and STAGE_FAMILY[target_stage] != STAGE_FAMILY[layout.stage]:
        p.notes.append(f"the load config asks for ZeRO-{target_stage}, the checkpoint is ZeRO-{layout.stage}: a "
                       "universal checkpoint keeps the model-states file names of its stage, so a load at another "
                       "stage family still finds none; for a stage change use `ds-triage repair fp32`")
    p.load = LoadSpec(mode="universal", load_dir=out, tag=None, world_size=world, config=config, config_source=label)
    p.how_to_load = ['add "checkpoint": {"load_universal": true} to the ds_config, then '
                     f"engine.load_checkpoint({out!r}) on any data-parallel size (it reads {out}/latest_universal)",
                     f"same ZeRO stage family as saved (ZeRO-{layout.stage})"]
    p.data["params"] = sorted((meta.param_shapes or {}).keys())
    p.data["model_files"] = [s.name for s in source.ctx.listing.of("model", "zero3_model")]
    return p


def execute(plan: Plan, staging: str) -> list[str]:
    run_tool(plan.commands[0], staging, plan.timeout, f"repair {NAME}: {plan.commands[0][2]}")
    zero = os.path.join(staging, plan.tag, "zero")
    folders = [n for n in os.listdir(zero) if os.path.isdir(os.path.join(zero, n))] if os.path.isdir(zero) else []
    return [f"ds_to_universal wrote {len(folders)} parameter folder(s)"]


def _sha(path: str, root: str) -> str:
    return sha256_file(path, root=root)[0]


def structural(plan: Plan) -> list[Check]:
    tag_dir = os.path.join(plan.out, plan.tag)
    zero = os.path.join(tag_dir, "zero")
    params = {n for n in os.listdir(zero) if os.path.isdir(os.path.join(zero, n))} if os.path.isdir(zero) else set()
    missing = [n for n in plan.data["params"] if n not in params or not os.path.isfile(os.path.join(zero, n, "fp32.pt"))]
    bad = []
    for dirpath, _, names in os.walk(zero):
        for name in names:
            z = zipcheck.check(os.path.join(dirpath, name))
            if not z.ok:
                bad.append(f"{os.path.relpath(os.path.join(dirpath, name), zero)}: {z.problem or z.unreadable}")
    copied = [n for n in plan.data["model_files"] if os.path.isfile(os.path.join(tag_dir, n))
              and _sha(os.path.join(tag_dir, n), plan.out) == _sha(os.path.join(plan.root, plan.tag, n), plan.root)]
    latest = os.path.join(plan.out, "latest_universal")
    named = None
    if os.path.isfile(latest):
        with confine.open_regular(latest, plan.out, "r") as f:
            named = f.read(4096).strip()
    return [
        Check("zero/ parameter folders", not missing and bool(params),
              f"{len(params)} parameter folder(s), each with fp32.pt" if not missing else
              f"missing fp32.pt for {len(missing)} saved parameter(s): {', '.join(missing[:5])}"),
        Check("zero/ files whole", not bad, "every file a whole torch.save archive" if not bad else "; ".join(bad[:3])),
        Check("model-states files copied", len(copied) == len(plan.data["model_files"]),
              f"{len(copied)} of {len(plan.data['model_files'])} identical to the original's"),
        Check("latest_universal", named == plan.tag, f"{latest} names {named!r}"),
    ]
