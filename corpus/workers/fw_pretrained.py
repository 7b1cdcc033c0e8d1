"""transformers save_pretrained / from_pretrained and PEFT adapters (one process, no DeepSpeed).

--save-dir DIR: DIR/model (LlamaForCausalLM.save_pretrained: config.json, model.safetensors)
and DIR/adapter (a LoRA adapter of that model: adapter_config.json, adapter_model.safetensors).
--load-dir PATH --load-as model: AutoModelForCausalLM.from_pretrained(PATH);
--load-as adapter: PeftModel.from_pretrained(<a --model base built from a config>, PATH).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

from corpus.workers import fw_common as C  # noqa: E402


def lora(model):
    from peft import LoraConfig, get_peft_model
    return get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))


def train_step(model):
    batch = C.TokenData(n=4)[0]
    loss = model(input_ids=batch["input_ids"][None], labels=batch["labels"][None]).loss
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p -= 1e-2 * p.grad
    return loss.item()


def main():
    p = C.parser(__doc__)
    p.add_argument("--load-as", choices=["model", "adapter"], default="model")
    args = p.parse_args()
    if args.save_dir:
        model = C.llama(args.model)
        C.log(f"step loss {train_step(model):.4f}")
        model.save_pretrained(os.path.join(args.save_dir, "model"))
        peft_model = lora(C.llama(args.model))
        C.log(f"adapter step loss {train_step(peft_model):.4f}")
        peft_model.save_pretrained(os.path.join(args.save_dir, "adapter"))
        C.log(f"saved {args.save_dir}/model and {args.save_dir}/adapter")
        return
    if args.load_as == "model":
        from transformers import AutoModelForCausalLM
        C.log(f"AutoModelForCausalLM.from_pretrained({args.load_dir!r})")
        model = AutoModelForCausalLM.from_pretrained(args.load_dir)
    else:
        from peft import PeftModel
        C.log(f"PeftModel.from_pretrained(<{args.model} base model>, {args.load_dir!r})")
        model = PeftModel.from_pretrained(C.llama(args.model), args.load_dir)
    C.log(f"loaded {type(model).__name__}, param checksum {C.checksum(model):.6f}")
    with torch.no_grad():
        batch = C.TokenData(n=4)[1]
        C.log(f"eval loss {model(input_ids=batch['input_ids'][None], labels=batch['labels'][None]).loss.item():.4f}")


if __name__ == "__main__":
    main()
