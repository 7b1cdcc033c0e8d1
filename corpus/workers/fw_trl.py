"""TRL's SFTTrainer with a DeepSpeed config (SFTConfig(deepspeed=...)): train and save checkpoint-N/
(--save-dir OUTPUT_DIR), or resume (--load-dir: an output dir, resumed with
resume_from_checkpoint=True, or a checkpoint-N dir, resumed from that path). Run under torchrun.

The tokenizer is a word-level one over the token ids, built in memory (nothing is downloaded);
the dataset is already tokenized, so TRL's dataset preparation still runs but adds no template.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from corpus.workers import fw_common as C  # noqa: E402


def tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {str(i): i for i in range(C.VOCAB - 2)} | {"<pad>": C.VOCAB - 2, "</s>": C.VOCAB - 1}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="0")


def dataset():
    from datasets import Dataset

    data = C.TokenData()
    return Dataset.from_dict({"input_ids": [row.tolist() for row in data.ids]})


def main():
    args = C.parser(__doc__).parse_args()
    from trl import SFTConfig, SFTTrainer

    out, resume, kwargs = C.trainer_setup(args)
    config = SFTConfig(**kwargs, max_length=C.SEQ, packing=False)
    trainer = SFTTrainer(model=C.llama(args.model), args=config, train_dataset=dataset(),
                         processing_class=tokenizer())
    C.log(f"SFTTrainer.train(resume_from_checkpoint={resume!r}) output_dir={out}")
    result = trainer.train(resume_from_checkpoint=resume or None)
    C.log(f"train finished: global_step={trainer.state.global_step} loss={result.training_loss:.4f}")


if __name__ == "__main__":
    main()
