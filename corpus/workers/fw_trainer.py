"""transformers Trainer with a DeepSpeed config (TrainingArguments(deepspeed=...)): train and save
checkpoint-N/ (--save-dir OUTPUT_DIR), or resume (--load-dir: an output dir, resumed with
resume_from_checkpoint=True, or a checkpoint-N dir, resumed from that path). Run under torchrun.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from corpus.workers import fw_common as C  # noqa: E402


def main():
    args = C.parser(__doc__).parse_args()
    from transformers import Trainer, TrainingArguments

    out, resume, kwargs = C.trainer_setup(args)
    targs = TrainingArguments(**kwargs)
    model = C.llama(args.model)
    trainer = Trainer(model=model, args=targs, train_dataset=C.TokenData())
    C.log(f"trainer.train(resume_from_checkpoint={resume!r}) output_dir={out}")
    result = trainer.train(resume_from_checkpoint=resume or None)
    C.log(f"train finished: global_step={trainer.state.global_step} loss={result.training_loss:.4f}")


if __name__ == "__main__":
    main()
