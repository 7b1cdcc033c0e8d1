"""What a state-dict difference means, read from its names and numbers.

torch's `load_state_dict` error lists the keys the model has and the checkpoint lacks (missing),
the keys the checkpoint has and the model lacks (unexpected) and the parameters whose shapes
differ; a copy of a flat fp32 partition says `The size of tensor a (N) must match the size of
tensor b (M)`. The model probe finds the same differences by comparing the checkpoint's saved
names and shapes with a model's. Either way the cause is in those names and numbers, and this
module is the one place that reads them (classify: `triage.logs.facts`; the probe:
`triage.probe.checks.model`, `triage.probe.model_claims`).

`analyse(Difference)` returns the signals that hold of torch's lists, each named in SIGNALS;
`compare(saved, expected)` compares two state dicts' names and shapes (the probe's checkpoint and
model) and reads the difference with the same signals. A signal explains some of the difference;
what no signal explains is `names_differ` / `shapes_unpatterned` (RESIDUAL: the model's
architecture is not the checkpoint's). Standard library only: classify imports it.
"""

from __future__ import annotations

import re

from triage.analysis.names import PREFIXES, align, module_renames
from triage.record import Frozen, Record  # not dataclasses: classify imports this (triage/record.py)

Shape = tuple

SIGNALS = {
    "prefix_module": "a `module.` prefix (DDP / DeepSpeed's engine wrapper) on one side's names only",
    "prefix_orig_mod": "an `_orig_mod.` prefix (torch.compile's wrapper) on one side's names only",
    "prefix_peft": "a `base_model.model.` prefix (a PEFT model's wrapper) on one side's names only",
    "prefix_model": "a `model.` prefix (a task head's base model, e.g. transformers' *ForCausalLM) on one side only",
    "renamed_module": "missing and unexpected names pair up once one module path is swapped for another",
    "adapter_keys": "PEFT adapter weights (lora_*, ia3_*, prompt encoders) on one side only",
    "engine_keys": "engine or optimizer state (optimizer.*, lr_scheduler, global_steps, ...) where a module's "
                   "weights were expected, or the reverse: a whole checkpoint dict read as a module state dict",
    "buffers_only": "only buffers differ (position_ids, attn.bias, masked_bias, inv_freq): a transformers "
                    "release saves, or stops saving, non-persistent buffers",
    "tied_head_missing": "only the output head's weight is missing: it is tied to the input embedding, and the "
                         "consolidated weights kept one copy",
    "adapter_only": "only a PEFT model's frozen base weights are missing (none an adapter's), nothing unexpected: the "
                    "checkpoint holds the adapter weights alone (an adapter-only save, exclude_frozen_parameters=True)",
    "vocab_resized": "only embedding / lm_head rows differ: the vocabulary was resized (tokens added or padded)",
    "adapter_shapes": "only adapter weights' (lora_A / lora_B) shapes differ: the adapter was trained on a base model "
                      "of other sizes (qualifier `base`), or built with another rank r (qualifier `rank`)",
    "zero3_placeholder": "one side's shapes are ZeRO-3 placeholders ([0] or [1]): parameters partitioned away, "
                         "saved or built without being gathered",
    "tp_ratio": "every differing shape differs by one integer ratio along one dimension: a tensor-parallel "
                "degree change (dimension 0: column-parallel, dimension 1: row-parallel)",
    "dp_ratio": "a flat fp32 partition is an integer multiple or fraction of the load's: another "
                "data-parallel world size",
    "partition_unpatterned": "a flat fp32 partition differs from the load's by no integer ratio: another number "
                             "of (trainable) parameter elements",
    "shapes_unpatterned": "shapes differ with no ratio, placeholder or vocabulary pattern: the architecture changed",
    "names_differ": "names differ that no prefix, rename, adapter, buffer or engine key explains",
}

# Parameter names PEFT gives adapter weights (peft/tuners: LoRA, DoRA, IA3, prompt tuning, trained heads).
ADAPTER = re.compile(r"(?:^|\.)(?:lora_\w+|ia3_l|prompt_encoder|prompt_embeddings|modules_to_save|adapter\w*)(?:\.|$)")
# Keys of DeepSpeed's checkpoint dict and of an optimizer / scheduler state, never a module's.
ENGINE = re.compile(r"^(?:optimizer|optimizer_state_dict|base_optimizer_state|lr_scheduler|global_steps|"
                    r"global_samples|skipped_steps|ds_config|ds_version|mp_world_size|dp_world_size|param_shapes|"
                    r"frozen_param_shapes|buffer_names|shared_params|client_state|zero_stage|"
                    r"state|param_groups)(?:\.|$)")
# Buffers transformers registers non-persistent in some releases and persistent in others.
BUFFER = re.compile(r"(?:^|\.)(?:position_ids|token_type_ids|masked_bias|inv_freq|_float_tensor|"
                    r"(?:attn|attention|self_attn)\.bias)$")
HEAD = re.compile(r"(?:^|\.)(?:lm_head|embed_out|output_layer|output)\.weight$")
EMBEDDING = re.compile(r"(?:^|\.)(?:embed_tokens|wte|word_embeddings|embed_in|embed_out|tok_embeddings|"
                       r"lm_head|shared|embeddings|output_layer)\.weight$")
PARTITION_SLACK = 0.01  # flat partitions are padded to an alignment: a ratio within 1% of an integer
PEFT_PREFIX = next(p for p, signal in PREFIXES if signal == "prefix_peft")  # every name of a PEFT model
# An adapter's low-rank factor, and the dimension of its shape that is the rank r: lora_A is [r, in],
# lora_B [out, r] (peft/tuners/lora: Linear, Embedding's lora_embedding_A/B, Conv's [r, in, k, k]).
LORA_FACTOR = re.compile(r"(?:^|\.)lora_(?:embedding_)?(?P<factor>[AB])(?:\.|$)")
# Signals that explain nothing: they say only that some of the difference is left unexplained
# (every other signal explains part of it).
RESIDUAL = ("names_differ", "shapes_unpatterned", "partition_unpatterned")


class Difference(Record):
    _fields = ("missing", "unexpected", "sizes", "partition", "saved")

    def __init__(self, missing: list | None = None, unexpected: list | None = None, sizes: dict | None = None,
                 partition: tuple | None = None, saved: list | None = None):
        self.missing = [] if missing is None else missing  # the model has them, the checkpoint lacks them
        self.unexpected = [] if unexpected is None else unexpected  # the checkpoint has them, the model lacks them
        self.sizes = {} if sizes is None else sizes  # name -> (checkpoint shape, model shape), tuples of ints
        self.partition = partition  # a flat fp32 partition's elements: (saved, the load's)
        self.saved = saved  # every name the checkpoint holds, when known (a probe reads them; a log never prints them)

    def __bool__(self) -> bool:
        return bool(self.missing or self.unexpected or self.sizes or self.partition)


class Signal(Frozen):
    """One thing the error's content says: a name (SIGNALS), optionally qualified by where it holds
    (`zero3_placeholder:checkpoint`, `missing:latest`), and the names and numbers it was read from."""

    _fields = ("name", "says", "facts", "qualifier")
    _hidden = ("facts",)  # what it was read from: not part of what it says

    def __init__(self, name: str, says: str, facts: dict | None = None, qualifier: str | None = None):
        self.name = name
        self.says = says  # one sentence with the names and numbers it read
        self.facts = {} if facts is None else facts
        side = self.facts.get("side")
        self.qualifier = side if qualifier is None and isinstance(side, str) else qualifier

    def holds(self, name: str, qualifier: str | None) -> bool:
        return self.name == name and (qualifier is None or self.qualifier == qualifier)


def analyse(diff: Difference) -> list[Signal]:
    """The signals of a difference as torch reports it: the names one side lacks, the shapes that differ."""
    saved, expected, removed, _ = align(dict.fromkeys(diff.unexpected), dict.fromkeys(diff.missing))
    missing, unexpected = sorted(expected.keys() - saved.keys()), sorted(saved.keys() - expected.keys())
    return _read(removed, missing, unexpected, diff.sizes, module_renames(missing, unexpected), diff.partition,
                 diff.saved)


class Comparison(Record):
    """Two state dicts' names and shapes compared (`compare`): what differs, and what that means."""

    _fields = ("removed", "missing", "unexpected", "skipped", "differ", "sizes", "renames", "signals")

    def __init__(self, removed, missing, unexpected, skipped, differ, sizes, renames, signals):
        self.removed = removed  # (prefix, signal, side) of each one-sided wrapper prefix compared without (align)
        self.missing, self.unexpected = missing, unexpected  # names only the model / only the checkpoint has
        self.skipped = skipped  # saved names left out as `optional`
        self.differ = differ  # names both hold with other shapes
        self.sizes = sizes  # name -> (saved shape, model shape) of those
        self.renames = renames  # module_renames, shapes checked
        self.signals = signals  # analyse's signals of this difference


def compare(saved: dict, expected: dict, optional=()) -> Comparison:
    """The checkpoint's names and shapes (`saved`) against a model's (`expected`), read by the same
    analysis as a difference a log reports. `optional`: saved names the model may lack without it
    being a difference (buffers, when the model's list names parameters only)."""
    a_saved, a_expected, removed, origin = align(saved, expected)
    missing = sorted(a_expected.keys() - a_saved.keys())
    unexpected = sorted(a_saved.keys() - a_expected.keys())
    skipped = [k for k in unexpected if origin.get(k) in optional]
    unexpected = [k for k in unexpected if k not in skipped]
    differ = sorted(k for k in a_saved.keys() & a_expected.keys() if tuple(a_saved[k]) != tuple(a_expected[k]))
    sizes = {k: (tuple(a_saved[k]), tuple(a_expected[k])) for k in differ}
    renames = module_renames(missing, unexpected, a_expected, a_saved)
    signals = _read(removed, missing, unexpected, sizes, renames, None, list(saved))
    return Comparison(removed, missing, unexpected, skipped, differ, sizes, renames, signals)


def names(signals: list[Signal]) -> set[str]:
    return {s.name for s in signals}


def _read(removed, missing: list[str], unexpected: list[str], sizes: dict, renames, partition,
          saved_names) -> list[Signal]:
    """The signals of a difference once wrapper prefixes are removed (align) and renames found."""
    signals: list[Signal] = []
    for prefix, name, side in removed:
        other = "model" if side == "checkpoint" else "checkpoint"
        signals.append(Signal(name, f"the {side}'s names carry `{prefix}`, the {other}'s do not",
                              {"prefix": prefix, "side": side}))
    explained: set[str] = set()
    for old, new, count in renames:
        signals.append(Signal("renamed_module", f"`{old}.*` in the checkpoint is `{new}.*` in the model ({count} names)",
                              {"checkpoint": old, "model": new, "tensors": count}))
        explained |= {k for k in unexpected if k.startswith(old + ".")} | {k for k in missing if k.startswith(new + ".")}
    signals += _classes(missing, unexpected, explained, saved_names)
    if sizes:
        signals.append(_shapes(sizes, only=not (missing or unexpected)))
    if partition:
        signals.append(_partition(*partition))
    return signals


def adapter_only(missing: list[str], unexpected: list[str], saved: list[str] | None) -> bool:
    """The missing names are a PEFT model's frozen base weights that an adapter-only save never held.
    With the checkpoint's names in hand: it holds adapter weights and nothing else. From torch's
    lists alone: every missing name is a PEFT model's (base_model.model.*), none is unexpected."""
    if not missing or any(ADAPTER.search(k) for k in missing):
        return False  # a missing adapter weight is the opposite: the adapters were not saved
    if saved is not None:
        return bool(saved) and all(ADAPTER.search(k) for k in saved)
    return not unexpected and all(k.startswith(PEFT_PREFIX) for k in missing)


def _classes(missing: list[str], unexpected: list[str], explained: set[str], saved: list[str] | None) -> list[Signal]:
    """Signals about which names differ (adapters, engine keys, buffers, the head), and what is left."""
    out = []
    for label, regex, name in (("adapter", ADAPTER, "adapter_keys"), ("engine", ENGINE, "engine_keys")):
        sides = {side: [k for k in keys if regex.search(k)] for side, keys in (("checkpoint", unexpected), ("model", missing))}
        for side, found in sides.items():
            if found:
                out.append(Signal(name, f"{len(found)} {label} name(s) only in the {side}: {_shown(found)}",
                                  {"side": side, "names": found[:20]}))
                explained |= set(found)
    rest = [k for k in missing + unexpected if k not in explained]
    if rest and all(BUFFER.search(k) for k in rest):
        side = "checkpoint" if set(rest) <= set(unexpected) else "model" if set(rest) <= set(missing) else "both"
        out.append(Signal("buffers_only", f"only buffers differ ({side}): {_shown(rest)}", {"side": side, "names": rest[:20]}))
        explained |= set(rest)
    elif not unexpected and len(missing) == 1 and HEAD.search(missing[0]):
        out.append(Signal("tied_head_missing", f"only `{missing[0]}` is missing", {"name": missing[0]}))
        explained.add(missing[0])
    elif adapter_only(missing, unexpected, saved):
        held = f"; the checkpoint holds {len(saved)} adapter name(s) only" if saved is not None else ""
        out.append(Signal("adapter_only", f"only {len(missing)} frozen base weight(s) of a PEFT model are missing, "
                          f"none an adapter's: {_shown(missing)}{held}", {"names": missing[:20]}))
        explained |= set(missing)
    rest = [k for k in missing + unexpected if k not in explained]
    if rest:
        out.append(Signal("names_differ", f"{len(rest)} name(s) differ unexplained: {_shown(rest)}", {"names": rest[:20]}))
    return out


def _shapes(sizes: dict, only: bool) -> Signal:
    pairs = {n: (tuple(c), tuple(m)) for n, (c, m) in sizes.items() if isinstance(c, (list, tuple))
             and isinstance(m, (list, tuple))}
    if not pairs:
        return Signal("shapes_unpatterned", "shapes differ, not readable as numbers", {})
    for side, index in (("checkpoint", 0), ("model", 1)):
        if all(_placeholder(p[index]) and not _placeholder(p[1 - index]) for p in pairs.values()):
            example = next(iter(pairs.items()))
            return Signal("zero3_placeholder", f"the {side} shows ZeRO-3 placeholder shapes (e.g. {example[0]} "
                          f"{list(example[1][index])} vs {list(example[1][1 - index])})", {"side": side})
    if all(LORA_FACTOR.search(n) for n in pairs):
        return _adapter_shapes(pairs)
    if all(EMBEDDING.search(n) for n in pairs) and all(_differs_in(c, m) == [0] for c, m in pairs.values()):
        rows = sorted({(c[0], m[0]) for c, m in pairs.values()})
        return Signal("vocab_resized", f"only embedding/head rows differ: checkpoint {rows[0][0]} rows, model "
                      f"{rows[0][1]}", {"rows": [list(r) for r in rows]})
    ratio = _common_ratio(pairs.values())
    if ratio is not None:
        factor, smaller, dims = ratio
        kinds = ", ".join(f"dimension {d} ({'column' if d == 0 else 'row'}-parallel)" for d in dims)
        return Signal("tp_ratio", f"every differing shape is {factor}x smaller in the {smaller}, along {kinds}: "
                      f"a tensor-parallel degree {factor} times the other side's", {"ratio": factor, "smaller": smaller,
                                                                                       "dims": dims, "only": only},
                      smaller)
    return Signal("shapes_unpatterned", f"{len(pairs)} shape(s) differ with no common ratio: "
                  f"{_shown([f'{n} {list(c)} vs {list(m)}' for n, (c, m) in pairs.items()])}", {})


def _adapter_shapes(pairs: dict) -> Signal:
    """Only lora_A / lora_B differ: along their rank dimension alone (another r), or along a base
    layer's in/out features (another base model). A rank change alone is 2x along one dimension
    too: read here, before any tensor-parallel ratio."""
    ranks, features = set(), set()
    for name, (c, m) in pairs.items():
        r = 0 if LORA_FACTOR.search(name)["factor"] == "A" else 1
        differ = _differs_in(c, m)
        if differ == [r]:
            ranks.add((c[r], m[r]))
        else:
            features |= {(c[d], m[d]) for d in differ if d >= 0}
    kind = "base" if features or not ranks else "rank"
    example = next(iter(pairs.items()))
    said = (f"features {', '.join(f'{a} vs {b}' for a, b in sorted(features))}" if kind == "base" else
            f"rank r {', '.join(f'{a} vs {b}' for a, b in sorted(ranks))}")
    return Signal("adapter_shapes", f"only the {len(pairs)} adapter weight(s) differ, in the base layers' {said} "
                  f"(checkpoint vs model; e.g. {example[0]} {list(example[1][0])} vs {list(example[1][1])})",
                  {"features": sorted(features), "ranks": sorted(ranks)}, kind)


def _common_ratio(pairs) -> tuple[int, str, list[int]] | None:
    """(r, the side whose shapes are r times smaller, the dimensions split) when every pair differs
    along exactly one dimension by the same integer r > 1, the same side smaller."""
    found = set()
    dims = set()
    for c, m in pairs:
        differ = _differs_in(c, m)
        if len(differ) != 1 or differ[0] < 0:  # several dimensions, or another number of them
            return None
        d = differ[0]
        small, big = sorted((c[d], m[d]))
        if small == 0 or big % small:
            return None
        found.add((big // small, "checkpoint" if c[d] < m[d] else "model"))
        dims.add(d)
    if len(found) != 1:
        return None
    factor, smaller = found.pop()
    return (factor, smaller, sorted(dims)) if factor > 1 else None


def _partition(saved: int, load: int) -> Signal:
    small, big = sorted((saved, load))
    factor = round(big / small) if small else 0
    if factor > 1 and abs(big - factor * small) <= PARTITION_SLACK * big:
        world = "the saving job's data-parallel size was" if saved < load else "the loading job's data-parallel size is"
        return Signal("dp_ratio", f"the saved flat partition holds {saved} elements, the load's {load}: {world} "
                      f"{factor}x the other's", {"saved": saved, "load": load, "ratio": factor,
                                                "larger_dp": "checkpoint" if saved < load else "load"},
                      "checkpoint" if saved < load else "load")
    return Signal("partition_unpatterned", f"the saved flat partition holds {saved} elements, the load's {load}: no "
                  "integer ratio", {"saved": saved, "load": load})


def _placeholder(shape: Shape) -> bool:
    return len(shape) == 1 and shape[0] in (0, 1)


def _differs_in(c: Shape, m: Shape) -> list[int]:
    if len(c) != len(m):
        return [-1]
    return [i for i, (a, b) in enumerate(zip(c, m)) if a != b]


def _shown(items: list[str], cap: int = 5) -> str:
    return ", ".join(items[:cap]) + (f" ... and {len(items) - cap} more" if len(items) > cap else "")
