"""Lightning with DeepSpeedStrategy: train and save (--save-dir), or resume with
trainer.fit(ckpt_path=--load-dir). Run under torchrun (Lightning reads its environment).

On this CPU-only machine Lightning refuses the strategy before any checkpoint IO (its
DeepSpeedStrategy.setup_environment requires a CUDAAccelerator); the corpus keeps that
attempt as a negative case (see corpus/NOTES.md).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

from corpus.workers import fw_common as C  # noqa: E402


def main():
    args = C.parser(__doc__).parse_args()
    import lightning as L
    from lightning.pytorch.strategies import DeepSpeedStrategy

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = C.llama(args.model)

        def training_step(self, batch, _):
            return self.model(**batch).loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    trainer = L.Trainer(accelerator="cpu", devices=int(os.environ.get("WORLD_SIZE", "1")),
                        strategy=DeepSpeedStrategy(stage=args.stage),
                        precision="bf16-mixed" if args.precision == "bf16" else "32-true",
                        max_steps=args.steps + (1 if args.load_dir else 0), logger=False,
                        enable_checkpointing=False, enable_progress_bar=False)
    data = torch.utils.data.DataLoader(C.TokenData(), batch_size=2)
    C.log(f"trainer.fit(ckpt_path={args.load_dir!r})")
    trainer.fit(Module(), data, ckpt_path=args.load_dir)
    if args.save_dir:
        trainer.save_checkpoint(args.save_dir)
        C.log(f"trainer.save_checkpoint({args.save_dir!r}) done")


if __name__ == "__main__":
    main()
