"""Shared helpers for the corpus worker scripts (model variants, ds config, mpu)."""
import argparse
import os
import sys

import torch
import torch.nn as nn

HIDDEN = 128


class TinyNet(nn.Module):
    """~100k parameters: a few Linear(h, h) layers plus a head."""

    def __init__(self, hidden=HIDDEN, layers=4, rename=False):
        super().__init__()
        self.hidden = hidden
        blocks = [nn.Linear(hidden, hidden) for _ in range(layers)]
        if rename:
            self.trunk = nn.ModuleList(blocks)
        else:
            self.blocks = nn.ModuleList(blocks)
        self.head = nn.Linear(hidden, 8)

    def forward(self, x, y):
        for blk in (self.trunk if hasattr(self, "trunk") else self.blocks):
            x = torch.relu(blk(x))
        out = self.head(x)
        return nn.functional.cross_entropy(out.float(), y)


MODEL_VARIANTS = {
    "base": dict(),
    "hidden": dict(hidden=192),      # hidden size changed
    "extra": dict(layers=5),         # an extra layer
    "removed": dict(layers=3),       # a removed layer
    "renamed": dict(rename=True),    # module renamed blocks -> trunk
    "big": dict(hidden=1024, layers=6),  # ~6.3M params -> ~75 MB checkpoint for RLIMIT_AS test
}


def build_model(variant):
    return TinyNet(**MODEL_VARIANTS[variant])


def add_common_args(p):
    p.add_argument("--stage", type=int, default=0)
    p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")
    p.add_argument("--model", default="base", choices=sorted(MODEL_VARIANTS))
    p.add_argument("--optimizer", default="adamw", choices=["adamw", "sgd", "adamw2groups", "ds_adamw"])
    p.add_argument("--tp", type=int, default=1, help="model-parallel size via a simple mpu")
    p.add_argument("--pipe", type=int, default=0, help="pipeline stages (0 = no PipelineModule)")
    p.add_argument("--steps", type=int, default=3)
    return p


def ds_config(args):
    cfg = {
        "train_micro_batch_size_per_gpu": 4,
        "gradient_accumulation_steps": 1,
        "steps_per_print": 1,
        "zero_allow_untested_optimizer": True,
        "zero_optimization": {"stage": args.stage},
        "wall_clock_breakdown": False,
    }
    if args.precision == "bf16":
        cfg["bf16"] = {"enabled": True}
    elif args.precision == "fp16":
        cfg["fp16"] = {"enabled": True, "initial_scale_power": 8}
    if args.optimizer == "ds_adamw":
        cfg["optimizer"] = {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}}
    return cfg


def build_optimizer(args, model):
    if args.optimizer == "ds_adamw":
        return None
    if args.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    if args.optimizer == "adamw2groups":
        params = list(model.named_parameters())
        decay = [p for n, p in params if n.endswith("weight")]
        nodecay = [p for n, p in params if not n.endswith("weight")]
        return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                  {"params": nodecay, "weight_decay": 0.0}], lr=1e-3)
    return torch.optim.AdamW(model.parameters(), lr=1e-3)


class SimpleMPU:
    """Minimal mpu: ranks split into tp groups of size `tp`; dp across them."""

    def __init__(self, tp):
        import torch.distributed as tdist
        world, rank = tdist.get_world_size(), tdist.get_rank()
        self.tp, self.world, self.rank = tp, world, rank
        self._mp_group = self._dp_group = None
        for start in range(0, world, tp):
            ranks = list(range(start, start + tp))
            g = tdist.new_group(ranks)
            if rank in ranks:
                self._mp_group = g
        for off in range(tp):
            ranks = list(range(off, world, tp))
            g = tdist.new_group(ranks)
            if rank in ranks:
                self._dp_group = g

    def get_model_parallel_rank(self):
        return self.rank % self.tp

    def get_model_parallel_world_size(self):
        return self.tp

    def get_model_parallel_group(self):
        return self._mp_group

    def get_data_parallel_rank(self):
        return self.rank // self.tp

    def get_data_parallel_world_size(self):
        return self.world // self.tp

    def get_data_parallel_group(self):
        return self._dp_group


def batch(engine, hidden, seed, bs=4):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(bs, hidden, generator=g)
    y = torch.randint(0, 8, (bs,), generator=g)
    dtype = next(engine.module.parameters()).dtype
    return x.to(dtype), y


def set_ds_log_level():
    """Workers log DeepSpeed at INFO (as most user launch scripts / HF Trainer runs do);
    override with CORPUS_DS_LOG_LEVEL=warning."""
    level = os.environ.get("CORPUS_DS_LOG_LEVEL", "info")
    try:
        from deepspeed.utils.logging import set_log_level_from_string
    except ImportError:   # DeepSpeed < 0.17 (older release pairs): its logger already logs at INFO
        import logging
        from deepspeed.utils import logger
        logger.setLevel(getattr(logging, level.upper()))
        return
    set_log_level_from_string(level)


def log(msg):
    print(f"[worker rank {os.environ.get('RANK', '0')}] {msg}", flush=True)
    sys.stdout.flush()


def exit_without_teardown():
    """Leave once the work is done, without the interpreter's teardown: there, a two-rank ZeRO-3
    job on this CPU build aborts now and then ('terminate called without an active exception',
    SIGABRT) after it saved, and torchrun fails the whole run (3 of 40 runs of train_save.py
    alongside another; 0 of 28 with this). A failing run raises before it gets here, as before."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def param_checksum(engine):
    """Sum of |params| over the full (gathered) model, to show which values got loaded."""
    import deepspeed
    params = list(engine.module.parameters())
    if engine.zero_optimization_partition_weights():
        with deepspeed.zero.GatheredParameters(params, modifier_rank=None):
            return float(sum(p.detach().float().abs().sum() for p in params))
    return float(sum(p.detach().float().abs().sum() for p in params))
