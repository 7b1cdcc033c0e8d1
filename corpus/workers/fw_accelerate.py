"""accelerate with its DeepSpeed plugin: train and accelerator.save_state(--save-dir), or
accelerator.load_state(--load-dir) and take one step. Run under torchrun.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

from corpus.workers import fw_common as C  # noqa: E402


def main():
    p = C.parser(__doc__)
    p.add_argument("--kill-after-saves", type=int, default=0,
                   help="SIGKILL this rank after DeepSpeed wrote N of its files (preemption mid-save_state)")
    args = p.parse_args()
    from accelerate import Accelerator, DeepSpeedPlugin
    from accelerate.utils import set_seed

    plugin = DeepSpeedPlugin(hf_ds_config=C.ds_config(args.stage, args.precision, auto=False))
    acc = Accelerator(deepspeed_plugin=plugin, mixed_precision="bf16" if args.precision == "bf16" else "no")
    set_seed(42)
    model = C.llama(args.model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3) if args.optimizer == "adamw" else \
        torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.9)
    data = torch.utils.data.DataLoader(C.TokenData(), batch_size=2)
    model, opt, data, sched = acc.prepare(model, opt, data, sched)
    if args.kill_after_saves:
        from corpus.workers.train_save import kill_after
        kill_after(model, args.kill_after_saves)  # the DeepSpeedEngine accelerate wrapped the model in
    if args.load_dir:
        C.log(f"accelerator.load_state({args.load_dir!r})")
        acc.load_state(args.load_dir)
        C.log("load_state returned")
    batches = iter(data)
    for step in range(1 if args.load_dir else args.steps):
        loss = model(**next(batches)).loss
        acc.backward(loss)
        opt.step()
        sched.step()
        opt.zero_grad()
        C.log(f"step {step} loss {loss.item():.4f}")
    if args.save_dir:
        acc.save_state(args.save_dir)
        C.log(f"accelerator.save_state({args.save_dir!r}) done")


if __name__ == "__main__":
    main()
