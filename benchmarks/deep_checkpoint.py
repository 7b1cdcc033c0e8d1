"""A 64-rank ZeRO-2 checkpoint whose shards agree with each other, for timing `probe --deep`.

bench_probe.py's 64-shard checkpoints tile each real partition to any size, so their partitions
no longer add up to the model: the consistency probe (rightly) flags every rank there and compares
little. This one is consistent, so `--deep` does all of its work: every rank's fp32 master
partition is compared with its slice of the module weights, and every byte is read.

Made from the same real ZeRO-2 dp-2 fp32 checkpoint (corpus/generate.py's z2-dp2-fp32), with the
same pickle globals (DeepSpeed's LossScaler, ZeroStageEnum, fragment_address):

* rank r's fp32 partition, exp_avg and exp_avg_sq: N-element tiles of the real rank (r % 2)'s
  values, shifted by r (N even, so 64 x N is a multiple of DeepSpeed's 2 x dp alignment and no
  rank is padded); 64 distinct files (no hard links: each rank's param_slice_mappings are its own);
* the model states: the real file with dp_world_size 64 and its module replaced by one flat fp32
  buffer holding the 64 partitions in rank order (DeepSpeed saves views of its flat buffer, so
  the module is one storage record), cut into the real parameter names with 1-D shapes whose
  sizes keep the real proportions and add up to 64 x N; param_shapes says the same;
* param_slice_mappings, partition_count [64], group_paddings [0], param_alignment_paddings as
  DeepSpeed writes them for that layout (triage.probe.flat_layout recomputes them; the real
  checkpoints of tests/test_probe_consistency.py check that layout against DeepSpeed's own).
"""

from __future__ import annotations

import shutil
from collections import OrderedDict
from pathlib import Path

DP = 64
TAG = "global_step3"


def build(root: Path, source: Path, numel: int) -> None:
    import torch
    from deepspeed.utils.tensor_fragment import fragment_address

    from triage.probe.flat_layout import zero12_group

    assert numel % 2 == 0, "N must be even: 64 x N a multiple of 2 x 64"
    src = source / TAG
    tmp = root.with_name(root.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / TAG).mkdir(parents=True)
    (tmp / "latest").write_text(TAG)
    real = [torch.load(src / f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt", map_location="cpu", weights_only=False)
            for r in range(2)]
    parts = [_tiled(real[r % 2]["optimizer_state_dict"]["single_partition_of_fp32_groups"][0], numel, r)
             for r in range(DP)]
    model = torch.load(src / "mp_rank_00_model_states.pt", map_location="cpu", weights_only=False)
    shapes = _shapes(model["param_shapes"][0], DP * numel)
    flat = torch.cat(parts)
    module, offset = OrderedDict(), 0
    for name, n in shapes.items():
        module[name] = flat.narrow(0, offset, n)
        offset += n
    model.update(module=module, param_shapes=[OrderedDict((k, torch.Size([n])) for k, n in shapes.items())],
                 dp_world_size=DP)
    torch.save(model, tmp / TAG / "mp_rank_00_model_states.pt")
    del model, module, flat
    layout = zero12_group({k: (n,) for k, n in shapes.items()}, DP, [0] * len(shapes))
    for rank in range(DP):
        name = tmp / TAG / f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt"
        sd = real[rank % 2]
        osd = sd["optimizer_state_dict"]
        state = {k: dict(v) for k, v in osd["base_optimizer_state"]["state"].items()}
        for s in state.values():
            for key in ("exp_avg", "exp_avg_sq"):
                s[key] = _tiled(s[key], numel, rank)
        mappings = OrderedDict((n, fragment_address(numel=c, start=at)) for n, c, at in layout.slice_mappings(rank))
        saved = {k: osd[k] for k in ("single_partition_of_fp32_groups", "partition_count", "group_paddings",
                                     "param_alignment_paddings", "param_slice_mappings")}
        saved_state = osd["base_optimizer_state"]["state"]
        osd.update(single_partition_of_fp32_groups=[parts[rank]], partition_count=[DP], group_paddings=[0],
                   param_alignment_paddings=[[0] * len(shapes)], param_slice_mappings=[mappings])
        osd["base_optimizer_state"]["state"] = state
        torch.save(sd, name)
        osd.update(saved)
        osd["base_optimizer_state"]["state"] = saved_state
    shutil.rmtree(root, ignore_errors=True)
    tmp.rename(root)


def _tiled(t, numel: int, shift: int):
    flat = t.reshape(-1)
    reps = -(-(numel + shift) // flat.numel())
    return flat.repeat(reps)[shift:shift + numel].clone()


def _shapes(real: dict, total: int) -> dict[str, int]:
    """The real parameter names, sizes scaled to add up to `total` (the last takes the remainder)."""
    sizes = {k: int(torch_numel(v)) for k, v in real.items()}
    whole = sum(sizes.values())
    out = {k: n * total // whole for k, n in sizes.items()}
    last = next(reversed(out))
    out[last] += total - sum(out.values())
    return out


def torch_numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n
