"""DeepSpeed's own loads and converters over many checkpoints in one launch, for the trace test
(tests/hostile/test_gate_traces.py, whose audit hook records what each process opens).

    torchrun --nproc_per_node=N tests/hostile/trace_loads_worker.py load JOBS.json OUT.json
    python tests/hostile/trace_loads_worker.py convert JOBS.json OUT.json

JOBS.json: a list of {name, layout, load_dir, tag, options, tag_dir, twin, universal, out}.
`load`, in every rank, job after job in the same process (a launch costs each rank seconds of
imports, another engine a fraction of one): the model, optimizer, mpu and ds_config the job used
(corpus/workers/common.py and pipe_model.py, as load.py builds them; a framework layout's model
needs transformers, so its stand-in is the twin of its saved param groups, triage/repair/twin.py),
then engine.load_checkpoint with the job's tag and `options`. `convert`: zero_to_fp32 and
ds_to_universal of each job's tag, in this one process. A load or converter that raises is recorded
with its error and the next one runs: what it opened before it refused is in the trace all the same.
OUT.json (rank 0): {name: {"load" or a converter: "ok" or its error}}.
"""
import argparse
import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import deepspeed  # noqa: E402
import torch  # noqa: E402

from corpus import layouts  # noqa: E402
from corpus.workers import pipe_model  # noqa: E402
from corpus.workers.common import (MODEL_VARIANTS, SimpleMPU, add_common_args, build_model,  # noqa: E402
                                   build_optimizer, ds_config, exit_without_teardown)


def engine_for(job):
    lay = layouts.LAYOUTS[job["layout"]]
    args = add_common_args(argparse.ArgumentParser()).parse_args(layouts.worker_args(lay))
    mpu = SimpleMPU(args.tp) if args.tp > 1 else None
    if job["twin"]:
        from triage.repair import twin

        built = twin.build(job["twin"])
        model, opt = built["model"], built["optimizer"]
    else:
        model = pipe_model.build(args.pipe, **MODEL_VARIANTS[args.model]) if args.pipe else build_model(args.model)
        opt = build_optimizer(args, model)
    cfg = ds_config(args)
    if job["universal"]:
        cfg["checkpoint"] = {"load_universal": True}
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=cfg, mpu=mpu,
                                           model_parameters=None if opt else model.parameters())
    return engine


def load(job):
    torch.manual_seed(999)
    engine = engine_for(job)
    path, _ = engine.load_checkpoint(job["load_dir"], tag=job["tag"], **job["options"])
    if path is None:
        raise RuntimeError("load_checkpoint returned None: nothing loaded")


def convert(job):
    from deepspeed.checkpoint import ds_to_universal
    from deepspeed.utils.zero_to_fp32 import convert_zero_checkpoint_to_fp32_state_dict

    out = {"zero_to_fp32": _outcome(convert_zero_checkpoint_to_fp32_state_dict, job["load_dir"],
                                    os.path.join(job["out"], "fp32"), tag=job["tag"])}
    # its output beside latest_universal, which names it (the test loads two with load_universal)
    universal = os.path.join(job["out"], "universal", os.path.basename(job["tag_dir"]) + "_universal")
    sys.argv = ["ds_to_universal", "--input_folder", job["tag_dir"], "--output_folder", universal,
                "--inject_missing_state", "--num_extract_workers", "1", "--num_merge_workers", "1"]
    out["ds_to_universal"] = _outcome(lambda: ds_to_universal.main(ds_to_universal.parse_arguments()))
    return out


def _outcome(step, *args, **kwargs) -> str:
    try:
        step(*args, **kwargs)
    except (Exception, SystemExit) as exc:  # a converter refusing a layout may sys.exit
        traceback.print_exc()
        return f"{type(exc).__name__}: {exc}"[:500]
    return "ok"


def _order(job):
    """ZeRO-3's module hooks after the other engines (as corpus/workers/train_many.py orders them), and
    an mpu's (pipeline or tensor parallel) last of all: DeepSpeed keeps the latest engine's mpu in
    deepspeed.utils.groups.mpu, which an engine built later without one would use."""
    lay = layouts.LAYOUTS[job["layout"]]
    return bool(lay.get("pipe") or lay.get("tp")), lay["stage"] == 3


def main():
    mode, jobs_path, out_path = sys.argv[1:4]
    jobs = json.loads(open(jobs_path).read())
    results = {}
    if mode == "load":
        deepspeed.init_distributed(dist_backend="gloo")
        for job in sorted(jobs, key=_order):
            results[job["name"]] = {"load": _outcome(load, job)}
    else:
        for job in jobs:
            results[job["name"]] = convert(job)
    if int(os.environ.get("RANK", "0")) == 0:
        with open(out_path, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
    exit_without_teardown()
