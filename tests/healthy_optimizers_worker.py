"""Healthy real saves of every optimizer DeepSpeed checkpoints, in one torchrun launch.

For each config of CONFIGS x stages 1, 2, 3: a fresh ~100k-parameter model, deepspeed.initialize
with that optimizer (from the ds_config, or a torch optimizer passed as the client's), 3 steps (2 for
ds-adam-2steps, whose shards the tests mix into ds-adam's tag),
save_checkpoint into OUT/<name>-z<stage>. What each becomes on a CPU accelerator (deepspeed
0.19.8, engine._configure_basic_optimizer): `"type": "Adam"/"AdamW"` is DeepSpeed's FusedAdam (its
CPU build: a `step` per param group that stays 0, beside the per-parameter one), with
offload_optimizer to the CPU DeepSpeedCPUAdam, with `torch_adam` torch's Adam/AdamW.

    torchrun --nproc_per_node=2 tests/healthy_optimizers_worker.py --out DIR [--only NAME ...]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import deepspeed  # noqa: E402

from corpus.workers.common import TinyNet, exit_without_teardown  # noqa: E402

STAGES = (1, 2, 3)
HIDDEN, LAYERS = 128, 6  # 6 x (128 x 128 + 128) + 128 x 8 + 8 = 100,104 parameters
FROZEN = ("blocks.0.", "blocks.1.")  # requires_grad=False: the optimizer keeps no state for them


def _groups(model, lr_head=5e-4):
    """Three param groups: decayed weights, biases, the head (its own lr)."""
    named = list(model.named_parameters())
    return [{"params": [p for n, p in named if n.endswith("weight") and not n.startswith("head")],
             "weight_decay": 0.1},
            {"params": [p for n, p in named if n.endswith("bias") and not n.startswith("head")],
             "weight_decay": 0.0},
            {"params": [p for n, p in named if n.startswith("head")], "lr": lr_head}]


# name -> (ds_config "optimizer" or None, client optimizer factory or None, zero_optimization extras, frozen)
CONFIGS = {
    "ds-adam": ({"type": "Adam", "params": {"lr": 1e-3}}, None, {}, False),
    "ds-adamw": ({"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}}, None, {}, False),
    "ds-adam-cpu": ({"type": "Adam", "params": {"lr": 1e-3}}, None,
                    {"offload_optimizer": {"device": "cpu"}}, False),
    "ds-adamw-torch": ({"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}}, None, {}, False),
    "ds-adam-elastic": ({"type": "Adam", "params": {"lr": 1e-3}}, None, {"elastic_checkpoint": True}, False),
    "ds-adam-frozen": ({"type": "Adam", "params": {"lr": 1e-3}}, None, {}, True),
    "torch-adam": (None, lambda m: torch.optim.Adam(m.parameters(), lr=1e-3), {}, False),
    "torch-adamw": (None, lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3), {}, False),
    "torch-sgd-momentum": (None, lambda m: torch.optim.SGD(m.parameters(), lr=1e-2, momentum=0.9), {}, False),
    "torch-adamw-groups": (None, lambda m: torch.optim.AdamW(_groups(m), lr=1e-3), {}, False),
    "torch-adamw-frozen": (None, lambda m: torch.optim.AdamW(
        [p for p in m.parameters() if p.requires_grad], lr=1e-3), {}, True),
    "torch-adamw-groups-frozen": (None, lambda m: torch.optim.AdamW(_groups(m), lr=1e-3), {}, True),
    # ds-adam one step short: its shards put into ds-adam's tag are shards of another save
    "ds-adam-2steps": ({"type": "Adam", "params": {"lr": 1e-3}}, None, {}, False),
}
STEPS = {"ds-adam-2steps": 2}  # the others: 3


def names():
    """Every save's name, ZeRO-3 last (its module hooks stay on the process)."""
    return [f"{name}-z{stage}" for stage in STAGES for name in CONFIGS]


def ds_config(stage, optimizer, zero_extra):
    cfg = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1, "steps_per_print": 100,
           "zero_allow_untested_optimizer": True, "zero_optimization": dict({"stage": stage}, **zero_extra)}
    if stage == 3:
        cfg["zero_optimization"].pop("elastic_checkpoint", None)  # a ZeRO-1/2 setting
    if optimizer:
        cfg["optimizer"] = optimizer
    return cfg


def save(name, out):
    config, stage = name.rsplit("-z", 1)
    steps = STEPS.get(config, 3)
    optimizer, client, zero_extra, frozen = CONFIGS[config]
    torch.manual_seed(1234)
    model = TinyNet(hidden=HIDDEN, layers=LAYERS)
    for pname, p in model.named_parameters():
        p.requires_grad_(not (frozen and pname.startswith(FROZEN)))
    opt = client(model) if client else None
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=ds_config(int(stage), optimizer, zero_extra),
                                           model_parameters=None if opt else model.parameters())
    for step in range(steps):
        g = torch.Generator().manual_seed(step + 100 * engine.global_rank)
        loss = engine(torch.randn(4, HIDDEN, generator=g), torch.randint(0, 8, (4,), generator=g))
        engine.backward(loss)
        engine.step()
    engine.save_checkpoint(os.path.join(out, name))
    if engine.global_rank == 0:
        with open(os.path.join(out, f"{name}.json"), "w") as f:
            json.dump({"optimizer": type(engine.optimizer.optimizer if hasattr(engine.optimizer, "optimizer")
                                         else engine.optimizer).__name__,
                       "config": config, "stage": int(stage), "steps": steps}, f)
    dist.barrier()  # every rank's files written before the next save starts


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--only", nargs="*")
    args = p.parse_args()
    deepspeed.init_distributed(dist_backend="gloo")
    for name in names():
        if not args.only or name in args.only:
            save(name, args.out)


if __name__ == "__main__":
    main()
    exit_without_teardown()
