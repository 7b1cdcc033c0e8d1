"""Train and save several layouts of one world size in one torchrun launch: train_save.py's own
code, once per layout, in one process per rank.

A launch costs each rank about 3 CPU seconds before its first step (importing torch and DeepSpeed,
torch's compiler stack, which the optimizer and DeepSpeed's engine pull in), a second engine in
the same process 0.01 s. The checkpoints are what the same layouts save one launch each: every
layout seeds torch itself, and builds its own model, optimizer and engine (tests/test_corpus_
generate.py compares them tensor by tensor). Only for the baselines tests and the checkpoint gate
train: a corpus log is always one job's own launch.

    torchrun --nproc_per_node=N corpus/workers/train_many.py --plan PLAN.json
PLAN.json: a list of train_save.py argument lists.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch.distributed as dist  # noqa: E402

from corpus.workers import train_save  # noqa: E402
from corpus.workers.common import exit_without_teardown, log  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--plan", required=True)
    plan = json.loads(open(p.parse_args().plan).read())
    for number, argv in enumerate(plan, 1):
        log(f"layout {number}/{len(plan)}: train_save.py {' '.join(argv)}")
        train_save.main(argv)
        dist.barrier()  # every rank's files written before the next layout starts


if __name__ == "__main__":
    main()
    exit_without_teardown()
