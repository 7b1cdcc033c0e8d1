"""Healthy-checkpoint training runs that fail for reasons unrelated to checkpoint loading.

--mode shape    : wrong input feature size in forward (matmul shape error)
--mode oom      : a 10**13-byte allocation in forward (fails at once, uses no memory)
--mode raise-before-collective : rank 1 raises before an all_reduce; rank 0 sees gloo lose its peer
--mode early-exit : rank 1 returns early (exit 0); rank 0 blocks in a collective and dies
--mode store-timeout : run directly (no torchrun) as rank 0 of 2 with nobody to meet
"""
import argparse
import datetime
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402
import deepspeed  # noqa: E402

from corpus.workers.common import (add_common_args, batch, build_model, build_optimizer,  # noqa: E402
                                   ds_config, log, set_ds_log_level)


def main():
    p = add_common_args(argparse.ArgumentParser())
    p.add_argument("--mode", required=True,
                   choices=["shape", "oom", "raise-before-collective", "early-exit", "store-timeout"])
    p.add_argument("--init-timeout", type=int, default=30)
    args = p.parse_args()
    set_ds_log_level()
    deepspeed.init_distributed(dist_backend="gloo", timeout=datetime.timedelta(seconds=args.init_timeout))
    rank = int(os.environ.get("RANK", "0"))
    if args.mode == "raise-before-collective" and rank == 1:
        raise RuntimeError("dataset shard /data/train-00001.bin: unexpected end of stream")
    torch.manual_seed(1234)
    model = build_model(args.model)
    opt = build_optimizer(args, model)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=ds_config(args),
                                           model_parameters=None if opt else model.parameters())
    for step in range(args.steps):
        if args.mode == "early-exit" and rank == 1 and step == 1:
            log("no more data on this rank, leaving the training loop")
            return
        x, y = batch(engine, model.hidden, seed=step)
        if args.mode == "shape" and step == 1:
            x = torch.randn(4, model.hidden + 32)
        if args.mode == "oom" and step == 1:
            x = x + torch.empty(10**13 // 4, dtype=torch.float32).sum()
        loss = engine(x, y)
        engine.backward(loss)
        engine.step()
        log(f"step {step} loss {loss.item():.4f}")
    if args.mode == "early-exit":
        t = torch.ones(1)
        torch.distributed.all_reduce(t)
        log(f"all_reduce {t.item()}")


if __name__ == "__main__":
    main()
