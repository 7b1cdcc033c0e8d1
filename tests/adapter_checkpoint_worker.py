"""Saves a real DeepSpeed checkpoint of a LoRA-style model with only its trainable weights
(`engine.save_checkpoint(..., exclude_frozen_parameters=True)`), as PEFT training does.

The module tree reproduces the names peft gives a LoRA-wrapped model (the captured log of rule
DS-H001: `base_model.model.encoder.base_layer.weight` frozen, `...encoder.lora_A.default.weight`
trained, `base_model.model.decoder` frozen) without needing peft: peft is not a dependency.
Run under torchrun (1 rank, gloo, CPU): the tests do.
"""
import argparse

import deepspeed
import torch
from torch import nn


class LoraLinear(nn.Module):
    def __init__(self, n_in: int, n_out: int, rank: int = 8):
        super().__init__()
        self.base_layer = nn.Linear(n_in, n_out)
        self.lora_A = nn.ModuleDict({"default": nn.Linear(n_in, rank, bias=False)})
        self.lora_B = nn.ModuleDict({"default": nn.Linear(rank, n_out, bias=False)})

    def forward(self, x):
        return self.base_layer(x) + self.lora_B["default"](self.lora_A["default"](x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = LoraLinear(256, 256)
        self.decoder = nn.Linear(256, 8)

    def forward(self, x, y):
        return nn.functional.cross_entropy(self.decoder(torch.relu(self.encoder(x))), y)


class Peft(nn.Module):
    def __init__(self):
        super().__init__()
        self.base_model = nn.Module()
        self.base_model.model = Net()

    def forward(self, x, y):
        return self.base_model.model(x, y)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--save-dir", required=True)
    args = p.parse_args()
    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(0)
    model = Peft()
    for name, param in model.named_parameters():
        param.requires_grad = "lora_" in name
    trainable = [q for q in model.parameters() if q.requires_grad]
    engine, *_ = deepspeed.initialize(model=model, optimizer=torch.optim.AdamW(trainable, lr=1e-3),
                                      config={"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2}})
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(4, 256, generator=g), torch.randint(0, 8, (4,), generator=g)
    engine.backward(engine(x, y))
    engine.step()
    engine.save_checkpoint(args.save_dir, exclude_frozen_parameters=True)
    print(f"[adapter-worker] saved {args.save_dir}", flush=True)


if __name__ == "__main__":
    main()
