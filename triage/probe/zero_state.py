"""What the consistency check reads from a shard's (inert) object graph: partitions, paddings,
slice mappings, step counters; the module's weights and global_steps from a model-states file.

Keys as DeepSpeed writes them (deepspeed/checkpoint/constants.py): a ZeRO-1/2 optimizer shard's
`optimizer_state_dict` holds `single_partition_of_fp32_groups`, `group_paddings`,
`param_alignment_paddings`, `partition_count`, `param_slice_mappings` and the torch optimizer's
state as `base_optimizer_state` (a state dict, or one dict per group in an elastic checkpoint with
`base_optimizer_state_step`); a ZeRO-3 shard holds `fp32_flat_groups` and the torch state as
`optimizer_state_dict`. BF16_Optimizer shards (no `zero_stage`) keep padded partitions and are
told apart so that nothing is compared on a layout not verified here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from triage.probe.safe_pickle import Record, TensorMeta


@dataclass
class OptimState:
    kind: str  # "zero12", "zero3" or "bf16_optimizer"
    stage: int | None
    partitions: list[TensorMeta]  # one flat fp32 partition per param group
    group_paddings: list[int] | None = None
    alignment_paddings: list[list[int]] | None = None
    partition_count: list[int] = field(default_factory=list)
    slice_mappings: list[list[tuple[str, int, int]]] | None = None
    # (counter, value): "param" for a parameter's state, "group" for a param group's (FusedAdam keeps
    # both, its group one stays 0); value an int/float, or a TensorMeta to read
    steps: list[tuple[str, object]] = field(default_factory=list)


def optim_state(graph) -> OptimState | None:
    osd = graph.get("optimizer_state_dict") if isinstance(graph, dict) else None
    if not isinstance(osd, dict):
        return None
    stage = osd.get("zero_stage")
    stage = int(stage) if isinstance(stage, int) else None
    if isinstance(osd.get("fp32_flat_groups"), list):
        kind, parts, base = "zero3", osd["fp32_flat_groups"], osd.get("optimizer_state_dict")
    elif isinstance(osd.get("single_partition_of_fp32_groups"), list):
        kind = "zero12" if stage is not None else "bf16_optimizer"
        parts, base = osd["single_partition_of_fp32_groups"], osd.get("base_optimizer_state")
    else:
        return None
    if not all(isinstance(p, TensorMeta) for p in parts):
        return None
    count = osd.get("partition_count")
    counts = [c for c in (count if isinstance(count, (list, tuple)) else [count] * len(parts)) if isinstance(c, int)]
    state = OptimState(kind, stage, list(parts), _ints(osd.get("group_paddings")),
                       _int_lists(osd.get("param_alignment_paddings")), counts,
                       _mappings(osd.get("param_slice_mappings")))
    state.steps = _steps(base, osd.get("base_optimizer_state_step"))
    return state


def _ints(value) -> list[int] | None:
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
        return [int(v) for v in value]
    return None


def _int_lists(value) -> list[list[int]] | None:
    if isinstance(value, (list, tuple)):
        lists = [_ints(v) for v in value]
        if all(v is not None for v in lists):
            return lists
    return None


def _mappings(value) -> list[list[tuple[str, int, int]]] | None:
    if not isinstance(value, (list, tuple)):
        return None
    groups = []
    for group in value:
        if not isinstance(group, dict):
            return None
        entries = []
        for name, address in group.items():
            numel, start = _address(address)
            if numel is None:
                return None
            entries.append((str(name), numel, start))
        groups.append(entries)
    return groups


def _address(address) -> tuple[int | None, int | None]:
    """fragment_address(numel, start): a dataclass, pickled with its fields as state."""
    if isinstance(address, Record):
        numel, start = address.get("numel"), address.get("start")
        if numel is None and len(address.args) == 2:
            numel, start = address.args
        if isinstance(numel, int) and isinstance(start, int):
            return numel, start
    return None, None


def _steps(base, elastic_step) -> list[tuple[str, object]]:
    """Every `step` the torch optimizer state records, with its counter: per parameter state
    ("param"), or per param group ("group"; the elastic layout's base_optimizer_state_step is
    param_groups[0]'s)."""
    steps: list[tuple[str, object]] = []
    if elastic_step is not None:
        steps.append(("group", elastic_step))
    if isinstance(base, dict):
        state = base.get("state")
        for value in (state.values() if isinstance(state, dict) else []):
            if isinstance(value, dict) and "step" in value:
                steps.append(("param", value["step"]))
        for group in base.get("param_groups") or []:
            if isinstance(group, dict) and "step" in group:
                steps.append(("group", group["step"]))
    elif isinstance(base, list):  # elastic ZeRO-1/2: one state dict per group (its flat partition's)
        steps += [("param", g["step"]) for g in base if isinstance(g, dict) and "step" in g]
    return [(k, s) for k, s in steps if isinstance(s, (int, float, TensorMeta)) and not isinstance(s, bool)]


@dataclass
class ModelState:
    module: dict[str, TensorMeta]
    global_steps: int | None
    skipped_steps: int


def model_state(graph) -> ModelState | None:
    if not isinstance(graph, dict):
        return None
    module = graph.get("module")
    tensors = {str(k): v for k, v in module.items() if isinstance(v, TensorMeta)} if isinstance(module, dict) else {}
    steps, skipped = graph.get("global_steps"), graph.get("skipped_steps")
    return ModelState(tensors, steps if isinstance(steps, int) and not isinstance(steps, bool) else None,
                      skipped if isinstance(skipped, int) and not isinstance(skipped, bool) else 0)
