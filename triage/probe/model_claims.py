"""The model probe without --model: check what torch's load error said against the saved shapes.

torch names the keys it found missing or unexpected and the shapes it found different
(triage/probe/log_facts.py). The checkpoint's saved `param_shapes` bear each claim out (the
checkpoint really lacks the missing names, holds the unexpected ones, has the "from checkpoint"
shape) or contradict it, which means the failing load read some other checkpoint than this one.
A flat fp32 partition's size (torch's "size of tensor a ... tensor b") is checked against the
optimizer shards' saved partitions: on the saved dp, another size is another model
(partition_differs).

One claim has another reading: base weights "missing" from a checkpoint whose module state holds
adapter weights only (PEFT's lora_/ia3_/prompt names: saved with exclude_frozen_parameters=True
or by an adapter-only trainer). The model did not change; the checkpoint was never meant to hold
them (adapter_only, not missing_keys). What the checkpoint bears out is then read by the
state-dict analysis (triage/analysis/state_dict.py), as classify reads the log: a tensor-parallel
ratio, placeholders, buffers only, a dropped tied head ... (EXPLAINED).
"""

from __future__ import annotations


from triage.analysis.state_dict import PREFIXES, RESIDUAL, SIGNALS as ANALYSIS, Difference, adapter_only, analyse
from triage.probe.log_facts import ModelClaims
from triage.probe.result import ProbeResult, outcome

NAME = "model"
CAP = 10
# What the analysis (triage/analysis/state_dict.py) reads in a difference beyond the wrapper prefixes and
# renames the model check words itself: a tensor-parallel ratio, ZeRO-3 placeholders and their side, a
# resized vocabulary, buffers only, a dropped tied head, an adapter-only save, adapter or engine keys.
EXPLAINED = tuple(s for s in ANALYSIS if s not in RESIDUAL and s not in dict(PREFIXES).values()
                  and s not in ("renamed_module", "dp_ratio"))
# torch's names are relative to the module loaded; a saved name may carry a wrapper prefix.
_PREFIXES = ("", "module.", "_orig_mod.", "module._orig_mod.")


def _find(saved: dict, name: str):
    for prefix in _PREFIXES:
        if prefix + name in saved:
            return saved[prefix + name]
    return None


def _holds_shape(saved, shape: tuple) -> bool:
    """The saved entry has that shape (a set: pipeline layer files, one of their shapes has it)."""
    if isinstance(saved, set):
        return shape in saved
    return saved is not None and tuple(saved) == shape


def _names(names: list[str]) -> str:
    more = f" ... and {len(names) - CAP} more" if len(names) > CAP else ""
    return ", ".join(names[:CAP]) + more


def explaining(signals) -> list:
    """The analysis's signals that explain a difference (EXPLAINED), in its order."""
    return [s for s in signals if s.name in EXPLAINED]


def check_claims(ctx, claims: ModelClaims, shard: str, saved: dict, source: str,
                 module_keys: list[str] | None = None) -> ProbeResult:
    evidence: list[str] = []  # claims the checkpoint bears out
    context = [f"the log's load_state_dict error (line {claims.line}) checked against {len(saved)} names saved in "
               f"{shard} ({source}); no --model given"]
    signals: list[str] = []
    checked: list[str] = []
    # adapter_only from the checkpoint's own module keys, never from the log's names alone
    if claims.missing and module_keys is not None:
        checked.append("adapter_only")
        if adapter_only(claims.missing, claims.unexpected, list(module_keys)):
            signals.append("adapter_only")
            evidence.append(f"the checkpoint's module state holds adapter weights only ({_names(module_keys)}): the "
                            f"{len(claims.missing)} base weights torch reported missing were never saved in it (an "
                            "adapter-only save); they come from the pretrained base model")
    borne_out: dict = {}  # what the checkpoint bears out, for the analysis
    # (signal, names torch reported, whether the checkpoint bears a name out by holding it, what torch said)
    for signal, names, held, said in (("missing_keys", [] if "adapter_only" in signals else claims.missing, False, "missing"),
                                      ("unexpected_keys", claims.unexpected, True, "unexpected (the model lacks them)")):
        if not names:
            continue
        checked.append(signal)
        borne = borne_out[signal] = [n for n in names if (_find(saved, n) is not None) == held]
        verb = "holds" if held else "lacks"
        if borne:
            signals.append(signal)
            evidence.append(f"the checkpoint {verb} {len(borne)} of the {len(names)} names torch reported {said}: "
                            f"{_names(borne)}")
        else:
            context.append(f"contradicts the log: the checkpoint {'lacks' if held else 'holds'} every name torch "
                           f"reported {said.split(' ')[0]} ({_names(names)})")
    if claims.sizes:
        checked.append("shapes_differ")
        sizes = {n: (c, m) for n, (c, m) in claims.sizes.items() if _holds_shape(_find(saved, n), c)}
        borne = [f"{n} saved {list(c)} vs model {list(m)}" for n, (c, m) in sizes.items()]
        if borne:
            signals.append("shapes_differ")
            evidence.append(f"the checkpoint saved {len(borne)} of the {len(claims.sizes)} parameters torch reported "
                            f"with the shape torch read: {_names(borne)}")
        else:
            context.append("contradicts the log: no parameter torch reported is saved with the shape it read")
        borne_out["sizes"] = sizes
    _explain(borne_out, signals, evidence)
    if claims.partition:
        _check_partition(ctx, claims.partition, signals, checked, evidence, context)
    command = f"ds-triage inspect --shapes {ctx.q(ctx.ckpt.tag, shard)}"
    return outcome(NAME, signals=signals, checked=checked, complete=True,
                   found="the checkpoint's names and shapes are the ones torch's load error reported: the model the "
                         "job built differs from it",
                   clear="the checkpoint does not hold what torch's load error reported: the failing load read "
                         "another checkpoint", unknown="", evidence=evidence, context=context, command=command)


def _explain(borne_out: dict, signals: list[str], evidence: list[str]) -> None:
    """What the analysis reads in the difference the checkpoint bore out (a tensor-parallel ratio,
    placeholders, buffers only ...). adapter_only is the module keys' to decide (above)."""
    diff = Difference(missing=borne_out.get("missing_keys", []), unexpected=borne_out.get("unexpected_keys", []),
                      sizes=borne_out.get("sizes", {}))
    for signal in explaining(analyse(diff)) if diff else []:
        if signal.name != "adapter_only":
            signals.append(signal.name)
            evidence.append(f"{signal.name}: {signal.says}")


def _check_partition(ctx, claim: tuple[int, int], signals, checked, evidence, context) -> None:
    """torch's "size of tensor a (the load's) must match tensor b (saved)" from the copy of a flat
    fp32 partition: borne out when a saved optimizer shard holds a partition of b elements. On the
    saved data-parallel size that means another number of (trainable) parameter elements: the model
    changed. On another world size the partitions differ anyway (parallelism, not the model)."""
    from triage.probe.zero_state import optim_state

    saved_numel, load_numel = claim
    layout, target = ctx.layout(), ctx.target
    sizes = set()
    for shard in ctx.listing.of("optim") if ctx.listing is not None else []:
        meta = ctx.meta(shard.name)
        state = optim_state(meta.graph) if not meta.error else None
        sizes |= {p.numel for p in state.partitions} if state is not None else set()
    load_dp = target.dp if target.dp is not None else target.world_size if (target.mp or 1) == 1 else None
    if saved_numel not in sizes:
        context.append(f"contradicts the log: no saved fp32 partition has the {saved_numel} elements torch read "
                       f"(saved: {', '.join(map(str, sorted(sizes))) or 'none readable'})")
        return
    if layout is None or layout.dp is None or load_dp != layout.dp:
        context.append(f"a saved fp32 partition has the {saved_numel} elements torch read, the load's has "
                       f"{load_numel}; the load's data-parallel size is not known to be the saved dp, which "
                       "alone changes partition sizes")
        return
    checked.append("partition_differs")
    signals.append("partition_differs")
    evidence.append(f"the checkpoint's flat fp32 partition has {saved_numel} elements, as torch read; the load's has "
                    f"{load_numel} on the same data-parallel size (dp {layout.dp}, {target.sources.get('dp') or target.sources.get('world_size', '?')}): "
                    "the model the job built has another number of (trainable) parameter elements")

