"""Shared by the framework workers (fw_*.py): a tiny Llama built from a config, its data, the
DeepSpeed config the frameworks are given, the common options.

Nothing is downloaded: the model is built from a config (~115k parameters) and the data is
random token ids. Needs the `frameworks` extra (transformers, accelerate, peft, safetensors).
"""
import argparse
import os

import torch

# model variants, as in common.MODEL_VARIANTS: "hidden" is another run's model size
LLAMA = {
    "base": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2),
    "hidden": dict(hidden_size=96, intermediate_size=192, num_hidden_layers=2),
    "layers3": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3),
    "layers1": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=1),
}
VOCAB, SEQ = 256, 16


def llama_config(variant="base"):
    from transformers import LlamaConfig
    return LlamaConfig(vocab_size=VOCAB, num_attention_heads=4, num_key_value_heads=4,
                       max_position_embeddings=64, tie_word_embeddings=False, **LLAMA[variant])


def llama(variant="base", seed=1234):
    from transformers import LlamaForCausalLM
    torch.manual_seed(seed)
    return LlamaForCausalLM(llama_config(variant))


class TokenData(torch.utils.data.Dataset):
    """Random token ids, the same on every rank and run (seeded)."""

    def __init__(self, n=64, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, VOCAB, (n, SEQ), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def ds_config(stage, precision, auto=True):
    """The DeepSpeed config a user hands the framework ("auto" values are filled by transformers)."""
    fill = "auto" if auto else 2
    cfg = {
        "train_micro_batch_size_per_gpu": fill,
        "gradient_accumulation_steps": "auto" if auto else 1,
        "steps_per_print": 1,
        "zero_allow_untested_optimizer": True,
        "zero_optimization": {"stage": stage},
    }
    if precision == "bf16":
        cfg["bf16"] = {"enabled": True}
    return cfg


def trainer_setup(args):
    """For a Trainer (or subclass) worker: (output_dir, resume_from_checkpoint, TrainingArguments kwargs).
    --load-dir is an output dir (resume_from_checkpoint=True) or a checkpoint-N dir (that path)."""
    load = args.load_dir
    if load and os.path.basename(os.path.normpath(load)).startswith("checkpoint-"):
        out, resume = os.path.dirname(os.path.normpath(load)), load
    else:
        out, resume = args.save_dir or load, bool(load)
    kwargs = dict(
        output_dir=out,
        deepspeed=ds_config(args.stage, args.precision),
        per_device_train_batch_size=2,
        max_steps=args.steps + (1 if load else 0),
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no" if load else "steps",   # a resume never writes into the checkpoint it reads
        save_steps=args.steps,
        bf16=args.precision == "bf16",
        use_cpu=True,   # this machine has no GPU; transformers refuses bf16 on CPU without it
        report_to=[],
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=42,
    )
    return out, resume, kwargs


def parser(doc):
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--stage", type=int, default=2)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--model", default="base", choices=sorted(LLAMA))
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw", help="what the job prepares (fw_accelerate)")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--save-dir", help="train --steps steps and save there")
    g.add_argument("--load-dir", help="resume / load from there")
    return p


def log(msg):
    print(f"[worker rank {os.environ.get('RANK', '0')}] {msg}", flush=True)


def checksum(model):
    return float(sum(p.detach().float().abs().sum() for p in model.parameters()))
