"""A tiny DeepSpeed PipelineModule (layers saved as layer_XX-model_states.pt)."""
import torch
import torch.nn as nn
from deepspeed.pipe import PipelineModule, LayerSpec

from corpus.workers.common import HIDDEN


class Act(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def build(num_stages, layers=4, hidden=HIDDEN, **_):
    specs = []
    for _ in range(layers):
        specs += [LayerSpec(nn.Linear, hidden, hidden), LayerSpec(Act)]
    specs.append(LayerSpec(nn.Linear, hidden, 8))
    return PipelineModule(layers=specs, num_stages=num_stages,
                          loss_fn=lambda out, y: nn.functional.cross_entropy(out.float(), y),
                          partition_method="uniform")


def data_iter(engine, hidden, seed):
    g = torch.Generator().manual_seed(seed)
    dtype = torch.bfloat16 if engine.bfloat16_enabled() else (torch.half if engine.fp16_enabled() else torch.float)
    while True:
        x = torch.randn(4, hidden, generator=g).to(dtype)
        y = torch.randint(0, 8, (4,), generator=g)
        yield x, y
