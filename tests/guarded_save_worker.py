"""A training script that saves with triage.repair.guarded_save (run under torchrun, as the tests do).

Trains the corpus model 2 steps and saves (global_step2), 2 more and saves again (global_step4).
--kill makes rank 0 SIGKILL itself during the second save: `ds-save` after DeepSpeed wrote its
first file, `publish` once the tag is verified and renamed into place, just before `latest` moves.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import deepspeed  # noqa: E402
import torch  # noqa: E402

from corpus.workers.common import TinyNet, batch  # noqa: E402
from triage.repair import guarded_save  # noqa: E402


def kill_after_first_file(engine):
    original = engine.checkpoint_engine.save

    def save(state_dict, path, *args, **kwargs):
        out = original(state_dict, path, *args, **kwargs)
        print(f"[guarded-save-worker] wrote {path}; SIGKILL", flush=True)
        os.kill(os.getpid(), 9)
        return out
    engine.checkpoint_engine.save = save


def kill_before_latest():
    original = guarded_save.files.atomic_write

    def atomic_write(path, text):
        if os.path.basename(path) == "latest":
            print(f"[guarded-save-worker] tag published; SIGKILL before writing {path}", flush=True)
            os.kill(os.getpid(), 9)
        return original(path, text)
    guarded_save.files.atomic_write = atomic_write


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--save-dir", required=True)
    p.add_argument("--stage", type=int, default=2)
    p.add_argument("--kill", choices=["none", "ds-save", "publish"], default="none")
    args = p.parse_args()
    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(1234)
    model = TinyNet()
    engine, *_ = deepspeed.initialize(model=model, optimizer=torch.optim.AdamW(model.parameters(), lr=1e-3),
                                      config={"train_micro_batch_size_per_gpu": 4,
                                              "zero_optimization": {"stage": args.stage}})
    for round_ in range(2):
        for step in range(2):
            x, y = batch(engine, 128, seed=step + 10 * round_ + 100 * engine.global_rank)
            engine.backward(engine(x, y))
            engine.step()
        if round_ == 1 and engine.global_rank == 0:
            kill_after_first_file(engine) if args.kill == "ds-save" else None
            kill_before_latest() if args.kill == "publish" else None
        tag = guarded_save.save_checkpoint_safely(engine, args.save_dir)
        print(f"[guarded-save-worker] rank {engine.global_rank} saved {tag}", flush=True)


if __name__ == "__main__":
    main()
