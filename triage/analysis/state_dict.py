"""What a state-dict difference means, read from its names and numbers.

torch's `load_state_dict` error lists the keys the model has and the checkpoint lacks (missing),
the keys the checkpoint has and the model lacks (unexpected) and the parameters whose shapes
differ; a copy of a flat fp32 partition says `The size of tensor a (N) must match the size of
tensor b (M)`. The model probe finds the same differences by comparing the checkpoint's saved
names and shapes with a model's. Either way the cause is in those names and numbers, and this
module is the one place that reads them (classify: `triage.logs.facts`; the probe:
`triage.probe.checks.model`, `triage.probe.model_claims`).

`analyse(Difference)` returns the signals that hold, each named in SIGNALS. A signal explains some
of the difference; what no signal explains is `names_differ` / `shapes_unpatterned` (the model's
architecture is not the checkpoint's). Standard library only: classify imports it.
"""

from __future__ import annotations

import re

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
    "vocab_resized": "only embedding / lm_head rows differ: the vocabulary was resized (tokens added or padded)",
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

# (prefix, signal); torch.compile inside DDP gives module._orig_mod.: one prefix a round (align)
PREFIXES = (("module.", "prefix_module"), ("_orig_mod.", "prefix_orig_mod"), ("base_model.model.", "prefix_peft"),
            ("model.", "prefix_model"))
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


class Difference(Record):
    _fields = ("missing", "unexpected", "sizes", "partition")

    def __init__(self, missing: list | None = None, unexpected: list | None = None, sizes: dict | None = None,
                 partition: tuple | None = None):
        self.missing = [] if missing is None else missing  # the model has them, the checkpoint lacks them
        self.unexpected = [] if unexpected is None else unexpected  # the checkpoint has them, the model lacks them
        self.sizes = {} if sizes is None else sizes  # name -> (checkpoint shape, model shape), tuples of ints
        self.partition = partition  # a flat fp32 partition's elements: (saved, the load's)

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
    signals: list[Signal] = []
    saved, expected, removed, _ = align(dict.fromkeys(diff.unexpected), dict.fromkeys(diff.missing))
    for prefix, name, side in removed:
        other = "model" if side == "checkpoint" else "checkpoint"
        signals.append(Signal(name, f"the {side}'s names carry `{prefix}`, the {other}'s do not",
                              {"prefix": prefix, "side": side}))
    missing, unexpected = sorted(expected.keys() - saved.keys()), sorted(saved.keys() - expected.keys())
    explained: set[str] = set()
    for old, new, count in module_renames(missing, unexpected):
        signals.append(Signal("renamed_module", f"`{old}.*` in the checkpoint is `{new}.*` in the model ({count} names)",
                              {"checkpoint": old, "model": new, "tensors": count}))
        explained |= {k for k in unexpected if k.startswith(old + ".")} | {k for k in missing if k.startswith(new + ".")}
    signals += _classes(missing, unexpected, explained)
    if diff.sizes:
        signals.append(_shapes(diff.sizes, only=not (missing or unexpected)))
    if diff.partition:
        signals.append(_partition(*diff.partition))
    return signals


def names(signals: list[Signal]) -> set[str]:
    return {s.name for s in signals}


def _classes(missing: list[str], unexpected: list[str], explained: set[str]) -> list[Signal]:
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


def _strip(keys, prefix: str) -> dict[str, str]:
    """new name -> original name, `prefix` removed where present."""
    return {(k[len(prefix):] if k.startswith(prefix) else k): k for k in keys}


def align(saved: dict, expected: dict) -> tuple[dict, dict, list[tuple[str, str, str]], dict[str, str]]:
    """saved and expected renamed so that a one-sided wrapper prefix no longer differs.

    Returns the renamed dicts, the prefixes removed: (prefix, signal, side it was on), and the
    saved names' originals (renamed -> as saved). A prefix is removed only when it makes more
    names meet, and never when removing it would merge two names."""
    removed = []
    origin = {k: k for k in saved}
    for _ in range(len(PREFIXES)):  # e.g. `module._orig_mod.`: one prefix per round
        best = None
        overlap = len(saved.keys() & expected.keys())
        for prefix, signal in PREFIXES:
            for side in ("checkpoint", "model"):
                src = saved if side == "checkpoint" else expected
                if not any(k.startswith(prefix) for k in src):
                    continue
                renamed = _strip(src, prefix)
                if len(renamed) < len(src):
                    continue  # stripping would merge two names
                other = expected if side == "checkpoint" else saved
                gain = len(renamed.keys() & other.keys())
                if gain > overlap and (best is None or gain > best[0]):
                    best = (gain, prefix, signal, side, renamed)
        if best is None:
            break
        _, prefix, signal, side, renamed = best
        if side == "checkpoint":
            saved = {n: saved[o] for n, o in renamed.items()}
            origin = {n: origin[o] for n, o in renamed.items()}
        else:
            expected = {n: expected[o] for n, o in renamed.items()}
        removed.append((prefix, signal, side))
    return saved, expected, removed, origin


def module_renames(missing, unexpected, expected: dict | None = None, saved: dict | None = None
                   ) -> list[tuple[str, str, int]]:
    """(saved module path, model module path, tensors) for the renames that pair unexpected names with
    missing ones: the same rest of the name (and the same shape, when shapes are known) once one path
    is swapped for the other. The pairing covering most tensors first; a rename must cover at least
    two (one pair is a coincidence); without shapes, the rest must name a submodule's tensor (`fc1.weight`,
    not `weight`): any two layers share `weight` and `bias`."""
    shapes = saved is not None and expected is not None
    by_rest: dict[str, list[str]] = {}
    for name in missing:
        parts = name.split(".")
        for k in range(1, len(parts)):
            by_rest.setdefault(".".join(parts[k:]), []).append(".".join(parts[:k]))
    votes: dict[tuple[str, str], set[str]] = {}
    for name in unexpected:
        parts = name.split(".")
        for k in range(1, len(parts)):
            old, rest = ".".join(parts[:k]), ".".join(parts[k:])
            if not shapes and "." not in rest:
                continue
            for new in by_rest.get(rest, ()):
                same = not shapes or tuple(saved[name]) == tuple(expected[f"{new}.{rest}"])
                if new != old and same:
                    votes.setdefault((old, new), set()).add(rest)
    renames, taken_old, taken_new = [], set(), set()
    for (old, new), rests in sorted(votes.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        olds, news = {f"{old}.{r}" for r in rests} - taken_old, {f"{new}.{r}" for r in rests} - taken_new
        if min(len(olds), len(news)) >= 2:
            renames.append((old, new, min(len(olds), len(news))))
            taken_old |= olds
            taken_new |= news
    return renames
