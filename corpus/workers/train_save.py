"""Train a tiny model with real DeepSpeed for a few steps and save a checkpoint.

Run under torchrun.  Also used as the "resume" half of clean runs via --resume.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402
import deepspeed  # noqa: E402

from corpus.workers.common import (MODEL_VARIANTS, add_common_args, batch, build_model, build_optimizer,  # noqa: E402
                                   ds_config, exit_without_teardown, log, param_checksum, set_ds_log_level,
                                   SimpleMPU)
from corpus.workers import pipe_model  # noqa: E402


def main(argv=None):
    p = add_common_args(argparse.ArgumentParser())
    p.add_argument("--save-dir", required=True)
    p.add_argument("--tag", default=None)
    p.add_argument("--kill-after-saves", type=int, default=0,
                   help="SIGKILL this rank after N files were written (simulates preemption mid-save)")
    p.add_argument("--save-every", type=int, default=0, help="also save every N steps")
    p.add_argument("--load-after-save", action="store_true",
                   help="call load_checkpoint on the same engine right after saving")
    args = p.parse_args(argv)

    set_ds_log_level()
    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(1234)
    mpu = SimpleMPU(args.tp) if args.tp > 1 else None
    if args.pipe:
        model = pipe_model.build(args.pipe, **MODEL_VARIANTS[args.model])
    else:
        model = build_model(args.model)
    opt = build_optimizer(args, model)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=ds_config(args),
                                           model_parameters=None if opt else model.parameters(), mpu=mpu)
    hidden = MODEL_VARIANTS[args.model].get("hidden", 128)
    for step in range(args.steps):
        if args.pipe:
            loss = engine.train_batch(data_iter=pipe_model.data_iter(engine, hidden, step))
        else:
            x, y = batch(engine, hidden, seed=step + 100 * engine.global_rank)
            loss = engine(x, y)
            engine.backward(loss)
            engine.step()
        log(f"step {step} loss {loss.item():.4f}")
        if args.save_every and (step + 1) % args.save_every == 0 and step + 1 < args.steps:
            engine.save_checkpoint(args.save_dir)
    if args.kill_after_saves:
        kill_after(engine, args.kill_after_saves)
    engine.save_checkpoint(args.save_dir, tag=args.tag)
    log(f"saved checkpoint to {args.save_dir} tag={args.tag} param checksum {param_checksum(engine):.6f}")
    if args.load_after_save:
        load_path, _ = engine.load_checkpoint(args.save_dir, tag=args.tag)
        log(f"reloaded {load_path} into the same engine, param checksum {param_checksum(engine):.6f}")
        x, y = batch(engine, hidden, seed=7)
        loss = engine(x, y)
        engine.backward(loss)
        engine.step()
        log(f"step after reload loss {loss.item():.4f}")


def kill_after(engine, n):
    orig, count = engine.checkpoint_engine.save, [0]

    def save(state_dict, path, *a, **kw):
        out = orig(state_dict, path, *a, **kw)
        count[0] += 1
        if count[0] >= n:
            log(f"wrote {path}; now killing this rank (SIGKILL)")
            os.kill(os.getpid(), 9)
        return out
    engine.checkpoint_engine.save = save


if __name__ == "__main__":
    main()
    exit_without_teardown()
