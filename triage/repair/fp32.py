"""repair fp32: one consolidated fp32 state dict from the ZeRO shards, by DeepSpeed's zero_to_fp32.

The installed deepspeed.utils.zero_to_fp32 runs in a subprocess (never the copy DeepSpeed put
into the checkpoint dir). Output: pytorch_model.bin, or model.safetensors with --safetensors;
with --max-shard-size, shards plus the index JSON Hugging Face loaders read. Verified by names
and shapes against the param_shapes the checkpoint saved, read without torch.
"""

from __future__ import annotations

import importlib.util
import json
import os

from triage.errors import BadInput
from triage.probe.model_file import read_model, saved_shapes
from triage.probe.safe_pickle import read_shard
from triage.repair.engine_config import config_for_check
from triage.repair.gate import refuse_unless, require_whole
from triage.repair.plan import Check, LoadSpec, Plan, Refused, Source, default_out, new_path, refuse_inside, staging_for
from triage.repair.tools import PYTHON, run_tool

NAME = "fp32"
NEEDS = ("torch", "deepspeed")  # what its commands import (triage/probe/deps.py checks before --apply starts)


def weights_names(safetensors: bool, sharded: bool) -> list[str]:
    if safetensors:
        return ["model-0000N-of-0000M.safetensors", "model.safetensors.index.json"] if sharded else ["model.safetensors"]
    return ["pytorch_model-0000N-of-0000M.bin", "pytorch_model.bin.index.json"] if sharded else ["pytorch_model.bin"]


def plan(source: Source, options) -> Plan:
    tag = source.require_tag()
    layout = source.layout()
    refuse_unless(layout.stage_family != "0", f"{source.tag_dir} is a ZeRO-0 checkpoint: zero_to_fp32 reads ZeRO "
                  "optimizer shards, and mp_rank_00_model_states.pt already holds the whole model under `module`; "
                  "use `ds-triage repair strip-optimizer` for a weights-only copy")
    refuse_unless(not layout.names.universal, f"{source.tag_dir} is a universal checkpoint already")
    refuse_unless((layout.mp or 1) == 1 and not layout.names.layers,
                  f"{source.tag_dir} is model- or pipeline-parallel ({layout.describe()}): zero_to_fp32 does not "
                  "merge tensor or pipeline slices; use `ds-triage repair universal`")
    require_whole(source, NAME)
    if options.safetensors and importlib.util.find_spec("safetensors") is None:
        raise Refused("--safetensors needs the safetensors package: pip install safetensors")
    if options.max_shard_size and importlib.util.find_spec("huggingface_hub") is None:
        raise Refused("--max-shard-size needs huggingface_hub (zero_to_fp32 splits with it): pip install huggingface_hub")
    out = new_path(options.out or default_out(source, NAME), "--out")
    refuse_inside(out, source)
    p = Plan(action=NAME, root=source.root, tag=tag, out=out, staging=staging_for(out))
    p.reads = [source.tag_dir]
    p.writes = [os.path.join(out, n) for n in weights_names(options.safetensors, bool(options.max_shard_size))]
    p.commands = [[PYTHON, "-m", "triage.repair.fp32", source.root, "{staging}", "--tag", tag]
                  + (["--safetensors"] if options.safetensors else [])
                  + (["--max-shard-size", options.max_shard_size] if options.max_shard_size else [])]
    p.steps = [f"run DeepSpeed's convert_zero_checkpoint_to_fp32_state_dict (deepspeed.utils.zero_to_fp32, the "
               f"installed module) on {tag}, writing into {p.staging}",
               f"rename {p.staging} to {out}"]
    world = options.world_size or 1
    config, label, notes = config_for_check(source, options, world)
    p.notes += notes
    p.load = LoadSpec(mode="state-dict", load_dir=out, tag=None, world_size=world, config=config,
                      config_source=label, state_dict=out)
    loader = ("safetensors.torch.load_file(f)" if options.safetensors else "torch.load(f, weights_only=True)")
    p.how_to_load = [f"model.load_state_dict({loader}) for the file(s) in {out}; then deepspeed.initialize with any "
                     "ZeRO stage and world size (optimizer state is not carried over)",
                     "or load the dir with Hugging Face from_pretrained(..., state_dict=...) / its index JSON"]
    p.data["expected"] = _expected_shapes(source)
    return p


def _expected_shapes(source: Source) -> dict[str, list]:
    listing = source.ctx.listing
    model = (listing.of("model") or listing.of("zero3_model"))[0]
    shapes, _ = saved_shapes(read_shard(os.path.join(source.tag_dir, model.name)))
    return {k: list(v) for k, v in (shapes or {}).items()}


def execute(plan: Plan, staging: str) -> list[str]:
    run_tool(plan.commands[0], staging, plan.timeout, f"repair {NAME}: {plan.commands[0][2]}")
    return [f"zero_to_fp32 wrote {', '.join(sorted(os.listdir(staging)))}"]


def output_shapes(out: str) -> tuple[dict[str, tuple], list[str]]:
    """Names -> shapes over every weights file in `out` (read without torch), and problems found."""
    problems: list[str] = []
    names = sorted(os.listdir(out))
    weights = [n for n in names if n.endswith((".bin", ".safetensors"))]
    shapes: dict[str, tuple] = {}
    for name in weights:
        try:
            shapes.update(read_model(os.path.join(out, name)).shapes)
        except BadInput as exc:
            problems.append(exc.message)
    for index in (n for n in names if n.endswith(".index.json")):
        with open(os.path.join(out, index), encoding="utf-8") as f:
            weight_map = json.load(f).get("weight_map", {})
        missing = sorted({v for v in weight_map.values() if v not in names})
        if missing:
            problems.append(f"{index} names files that are not there: {', '.join(missing)}")
        if set(weight_map) != set(shapes):
            problems.append(f"{index} maps {len(weight_map)} tensors, the files hold {len(shapes)}")
    if not weights:
        problems.append(f"no .bin or .safetensors file in {out}")
    return shapes, problems


def compare(expected: dict[str, list], got: dict[str, tuple]) -> list[str]:
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    differ = sorted(k for k in set(expected) & set(got) if tuple(expected[k]) != tuple(got[k]))
    out = []
    if missing:
        out.append(f"{len(missing)} saved tensor(s) missing: {', '.join(missing[:5])}")
    if extra:
        out.append(f"{len(extra)} tensor(s) the checkpoint did not save: {', '.join(extra[:5])}")
    if differ:
        out.append("shape differs: " + ", ".join(f"{k} {list(got[k])} vs saved {expected[k]}" for k in differ[:5]))
    return out


def structural(plan: Plan) -> list[Check]:
    got, problems = output_shapes(plan.out)
    problems += compare(plan.data["expected"], got)
    detail = "; ".join(problems) if problems else (
        f"{len(got)} tensors, names and shapes equal to the checkpoint's saved param_shapes")
    return [Check("names and shapes", not problems, detail)]


# ------------------------------------------------------------------ the conversion (a subprocess)

def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m triage.repair.fp32",
                                     description="Run the installed deepspeed.utils.zero_to_fp32 conversion; unlike "
                                     "its command line, without --max-shard-size the output is not sharded (and "
                                     "huggingface_hub is not needed).")
    parser.add_argument("checkpoint_dir")
    parser.add_argument("output_dir")
    parser.add_argument("--tag", required=True)
    parser.add_argument("--safetensors", action="store_true")
    parser.add_argument("--max-shard-size")
    args = parser.parse_args(argv)
    from deepspeed.utils.zero_to_fp32 import convert_zero_checkpoint_to_fp32_state_dict

    convert_zero_checkpoint_to_fp32_state_dict(args.checkpoint_dir, args.output_dir, tag=args.tag,
                                               safe_serialization=args.safetensors,
                                               max_shard_size=args.max_shard_size)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
