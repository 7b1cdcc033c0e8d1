"""Resume from a DeepSpeed checkpoint (the loading path under test), then take one step.

Run under torchrun.  Options select the engine config/model at load time and how
load_checkpoint is called; a few opt-in hooks reproduce resource failures.
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


def limit_address_space(extra_mb):
    """RLIMIT_AS = current virtual size + extra_mb: imports are done, loading must fit."""
    import resource
    with open("/proc/self/status") as f:
        vm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
    limit = vm + extra_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    log(f"RLIMIT_AS set to {limit / 2**20:.0f} MiB (current VmSize {vm / 2**20:.0f} MiB)")


def kill_on_first_load(engine):
    """Send SIGKILL to ourselves when the checkpoint engine first reads a file."""
    orig = engine.checkpoint_engine.load

    def load(path, *a, **kw):
        os.kill(os.getpid(), 9)
        return orig(path, *a, **kw)
    engine.checkpoint_engine.load = load


def main():
    p = add_common_args(argparse.ArgumentParser())
    p.add_argument("--load-dir", required=True)
    p.add_argument("--tag", default=None)
    p.add_argument("--no-load-optim", action="store_true", help="load_optimizer_states=False")
    p.add_argument("--no-strict", action="store_true", help="load_module_strict=False")
    p.add_argument("--module-only", action="store_true", help="load_module_only=True")
    p.add_argument("--universal", action="store_true", help='"checkpoint": {"load_universal": true}')
    p.add_argument("--rlimit-as-extra-mb", type=int, default=0)
    p.add_argument("--sigkill-on-load", action="store_true")
    args = p.parse_args()

    set_ds_log_level()
    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(999)  # different init than training, so a checksum shows what was loaded
    mpu = SimpleMPU(args.tp) if args.tp > 1 else None
    model = pipe_model.build(args.pipe, **MODEL_VARIANTS[args.model]) if args.pipe else build_model(args.model)
    opt = build_optimizer(args, model)
    cfg = ds_config(args)
    if args.universal:
        cfg["checkpoint"] = {"load_universal": True}
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=cfg,
                                           model_parameters=None if opt else model.parameters(), mpu=mpu)
    log(f"engine ready, param checksum before load {param_checksum(engine):.6f}")
    if args.rlimit_as_extra_mb:
        limit_address_space(args.rlimit_as_extra_mb)
    if args.sigkill_on_load:
        kill_on_first_load(engine)
    log(f"loading checkpoint from {args.load_dir} tag={args.tag}")
    load_path, client_state = engine.load_checkpoint(args.load_dir, tag=args.tag,
                                                     load_module_strict=not args.no_strict,
                                                     load_optimizer_states=not args.no_load_optim,
                                                     load_module_only=args.module_only)
    keys = sorted(client_state) if client_state is not None else None
    log(f"load_checkpoint returned load_path={load_path} client_state keys={keys}")
    log(f"global_steps={engine.global_steps} param checksum after load {param_checksum(engine):.6f}")
    hidden = MODEL_VARIANTS[args.model].get("hidden", 128)
    if args.pipe:
        loss = engine.train_batch(data_iter=pipe_model.data_iter(engine, hidden, 7))
    else:
        x, y = batch(engine, hidden, seed=7)
        loss = engine(x, y)
        engine.backward(loss)
        engine.step()
    log(f"resumed step {engine.global_steps} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
    exit_without_teardown()
