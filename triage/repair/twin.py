"""A stand-in model with exactly the parameters a checkpoint saved, for loading it without the
user's model code (`ds-triage probe --reproduce` when no --model-factory is given).

DeepSpeed saves `param_shapes`: one {name: shape} dict per optimizer param group, in the order
the optimizer saw the parameters. A module tree built from those dotted names, in that order,
yields the same `parameters()` order (so ZeRO's flat partitions line up) and the same
state-dict keys; one param group per saved group keeps the optimizer's layout. It reproduces
whatever depends on the checkpoint, the ds_config and the world size; it cannot reproduce a
model changed since the save (that needs the real model: --model-factory).
Imported only inside the load checker's ranks: it needs torch.
"""

from __future__ import annotations


def build(groups: list[dict[str, list[int]]], optimizer: str | None = None) -> dict:
    """{"model": the twin, "optimizer": `optimizer` (a torch.optim class name, default AdamW) over
    the saved param groups, "param_groups": those groups} from the saved shapes."""
    import torch

    root = torch.nn.Module()
    params = []
    for group in groups:
        params.append([_add(root, name, shape) for name, shape in group.items()])
    param_groups = [{"params": p} for p in params if p]
    return {"model": root, "optimizer": make_optimizer(optimizer, param_groups), "param_groups": param_groups}


def make_optimizer(name: str | None, params):
    """torch.optim.<name> over params (AdamW when name is None or torch has no such class)."""
    import torch

    cls = getattr(torch.optim, name or "AdamW", None)
    if not (isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer)):
        cls = torch.optim.AdamW
    return cls(params, lr=1e-3)


def _add(root, name: str, shape) -> object:
    import torch

    *path, leaf = name.split(".")
    module = root
    for part in path:
        child = module._modules.get(part)
        if child is None:
            child = torch.nn.Module()
            module.add_module(part, child)
        module = child
    param = torch.nn.Parameter(torch.zeros(*shape))
    module.register_parameter(leaf, param)
    return param
