"""repair strip-optimizer: a weights-only copy of a tag, for inference or `load_module_only=True`.

ZeRO-1/2 model-states files hold the whole module and no optimizer state (that lives in the
`*_optim_states.pt` shards), so they (and pipeline layer files) are copied byte for byte and the
optimizer shards left out: no pickle is read. A ZeRO-0 model-states file holds the optimizer state
too: it is rewritten without it in a subprocess that reads it with torch.load(weights_only=True)
(python -m triage.repair.strip_optimizer SRC DST). ZeRO-3 is refused: its model-states files hold
placeholders, the weights are in the optimizer shards (use `repair fp32`).
"""

from __future__ import annotations

import argparse
import os

from triage.manifest.hashing import sha256_file
from triage.probe import checks, confine
from triage.probe.context import ProbeContext
from triage.probe.result import REFUTED
from triage.probe.safe_pickle import read_shard
from triage.repair import files
from triage.repair.engine_config import config_for_check
from triage.repair.gate import refuse_unless, require_whole
from triage.repair.plan import Check, LoadSpec, Plan, Source, default_out, new_path, refuse_inside, staging_for
from triage.repair.tools import PYTHON, run_tool

NAME = "strip-optimizer"
NEEDS = ("torch",)  # its ZeRO-0 rewrite (a command); copying ZeRO-1/2 files needs nothing
KEPT = ("model", "layer", "expert")  # checkpoint.SHARD_PATTERNS kinds that hold weights, not optimizer state
# ZeRO-0: the keys of a model-states file that are optimizer or scheduler state
DROPPED_KEYS = ("optimizer", "lr_scheduler")


def plan(source: Source, options) -> Plan:
    tag = source.require_tag()
    layout = source.layout()
    refuse_unless(layout.stage != 3 and layout.stage_family != "3",
                  f"{source.tag_dir} is ZeRO-3: its model-states files hold empty placeholders and the weights are "
                  "in the optimizer shards; use `ds-triage repair fp32` for a weights-only state dict")
    refuse_unless(not layout.names.universal, f"{source.tag_dir} is a universal checkpoint; strip it before converting")
    listing = source.ctx.listing
    kept = [s.name for s in listing.shards if s.kind in KEPT]
    require_whole(source, NAME, only=set(kept))  # a lost or damaged optimizer shard is what it leaves out
    out = new_path(options.out or default_out(source, "strip-optimizer"), "--out")
    refuse_inside(out, source)
    p = Plan(action=NAME, root=source.root, tag=tag, out=out, staging=staging_for(out))
    dropped = [s.name for s in listing.shards if s.kind not in KEPT]
    rewrite = layout.stage == 0
    p.reads = [os.path.join(source.tag_dir, n) for n in kept]
    p.writes = [os.path.join(out, tag, n) for n in kept] + [os.path.join(out, "latest")]
    if rewrite:
        p.commands = [[PYTHON, "-m", "triage.repair.strip_optimizer", os.path.join(source.tag_dir, n),
                       os.path.join("{staging}", tag, n)] for n in kept if n.startswith("mp_rank_")]
        p.steps.append(f"rewrite {len(p.commands)} model-states file(s) without {', '.join(DROPPED_KEYS)} "
                       "(ZeRO-0 keeps the optimizer state in them), read with torch.load(weights_only=True)")
    copies = [n for n in kept if not (rewrite and n.startswith("mp_rank_"))]
    if copies:
        p.steps.append(f"copy {len(copies)} file(s) byte for byte: {', '.join(copies[:4])}"
                       + (" ..." if len(copies) > 4 else ""))
    p.steps.append(f"leave out {len(dropped)} optimizer file(s)" + (f": {', '.join(dropped[:4])}" if dropped else ""))
    p.steps.append(f"write `latest` ({tag}) and rename {p.staging} to {out}")
    p.data.update(copies=copies, dropped=dropped, kept=kept)
    world = options.world_size or (layout.mp or 1)
    config, label, notes = config_for_check(source, options, world)
    p.notes += notes
    p.load = LoadSpec(mode="module-only", load_dir=out, tag=None, world_size=world, config=config, config_source=label)
    p.how_to_load = [f"engine.load_checkpoint({out!r}, load_module_only=True) on any data-parallel size and ZeRO "
                     "stage 0-2 (the optimizer starts fresh); a plain load_checkpoint looks for the optimizer shards "
                     "and fails"]
    return p


def execute(plan: Plan, staging: str) -> list[str]:
    tag_dir = os.path.join(staging, plan.tag)
    os.makedirs(tag_dir)
    for name in plan.data["copies"]:
        confine.copy_regular(os.path.join(plan.root, plan.tag, name), os.path.join(tag_dir, name), plan.root)
    for command in plan.commands:
        run_tool(command, staging, plan.timeout, f"repair {NAME}: {command[2]}")
    files.atomic_write(os.path.join(staging, "latest"), plan.tag)
    return [f"kept {len(plan.data['kept'])} file(s), left out {len(plan.data['dropped'])}"]


def structural(plan: Plan) -> list[Check]:
    tag_dir = os.path.join(plan.out, plan.tag)
    same = [n for n in plan.data["copies"] if sha256_file(os.path.join(tag_dir, n))[0]
            == sha256_file(os.path.join(plan.root, plan.tag, n))[0]]
    present = sorted(os.listdir(tag_dir))
    leftover = [n for n in present if n in plan.data["dropped"]]
    result = checks.run(ProbeContext.for_path(tag_dir), ("integrity",))["integrity"]
    out = [Check("weights files", set(plan.data["kept"]) <= set(present) and len(same) == len(plan.data["copies"]),
                 f"{len(plan.data['kept'])} file(s) present; {len(same)} copied byte for byte"),
           Check("no optimizer state", not leftover, "no optimizer shard in the copy" if not leftover else
                 f"still there: {', '.join(leftover)}"),
           Check("probe integrity", result.status == REFUTED, result.summary)]
    rewritten = [n for n in plan.data["kept"] if n not in plan.data["copies"]]
    if rewritten:
        still = [n for n in rewritten if read_shard(os.path.join(tag_dir, n)).optimizer]
        out.append(Check("optimizer state removed", not still, f"{len(rewritten)} model-states file(s) rewritten "
                         "with optimizer=None" if not still else f"optimizer state still in {', '.join(still)}"))
    return out


# ------------------------------------------------------------------ the ZeRO-0 rewrite (a subprocess)

def rewrite(src: str, dst: str) -> None:
    import torch  # only here: this runs as its own process

    state = torch.load(src, map_location="cpu", weights_only=True)
    for key in DROPPED_KEYS:
        if key in state:
            state[key] = None
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    torch.save(state, dst)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m triage.repair.strip_optimizer",
                                     description="Rewrite a ZeRO-0 model-states file without its optimizer and "
                                     "scheduler state (read with torch.load(weights_only=True)).")
    parser.add_argument("src")
    parser.add_argument("dst")
    args = parser.parse_args(argv)
    rewrite(args.src, args.dst)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
