"""optimizer: the optimizer type and number of param groups saved vs the ones the load builds.

Saved (safe_pickle, one optimizer shard, else the model-states file's `optimizer`): the torch
optimizer state inside DeepSpeed's (ZeRO-1/2 and bf16 `base_optimizer_state`, ZeRO-3
`optimizer_state_dict`). A state dict does not name its class, so the type is taken from, in
order: a `torch.optim` class global in the pickle, the saved ds_config's `optimizer.type`, then
the per-parameter state keys and hyperparameter names (SIGNATURES: exp_avg + exp_avg_sq +
amsgrad = Adam/AdamW, told apart by torch's `decoupled_weight_decay`; momentum_buffer or
nesterov = SGD; ...). Groups: the length of `param_groups` (else of `param_shapes`, one per group).

Expected: --optimizer NAME (else, for triage, the log's `DeepSpeed Basic Optimizer = NAME`; else
the `optimizer.type` of --config), --param-groups N.
Confirmed: type_differs, groups_differ. Inconclusive when nothing is expected or the checkpoint
does not say.
"""

from __future__ import annotations

import re

from triage.probe.context import ProbeContext
from triage.probe.layout import first_model_file, first_optim_file
from triage.probe.result import Findings, ProbeResult, outcome

NAME = "optimizer"
SIGNALS = ("type_differs", "groups_differ")

# Optimizers whose saved state has the same layout (a load between them does not fail on keys).
FAMILIES = {
    "adam": ("adam", "adamw", "fusedadam", "deepspeedcpuadam", "cpuadam", "apexfusedadam"),
    "sgd": ("sgd",),
    "lamb": ("lamb", "fusedlamb"),
    "lion": ("lion", "fusedlion", "deepspeedcpulion"),
    "adagrad": ("adagrad", "deepspeedcpuadagrad"),
    "rmsprop": ("rmsprop",), "adadelta": ("adadelta",), "adamax": ("adamax",), "nadam": ("nadam",),
    "radam": ("radam",), "asgd": ("asgd",), "rprop": ("rprop",), "lbfgs": ("lbfgs",),
    "onebitadam": ("onebitadam", "zerooneadam"), "onebitlamb": ("onebitlamb",),
}
# Names that say only the family (their class cannot be told apart from the state): compared by family.
FAMILY_ONLY = {"fusedadam", "deepspeedcpuadam", "cpuadam", "apexfusedadam", "fusedlamb", "fusedlion",
               "deepspeedcpulion", "deepspeedcpuadagrad"}

# (name, required state keys, required group keys, excluded group keys) -> first match wins
SIGNATURES = (
    ("NAdam", {"mu_product"}, set(), set()),
    ("Adamax", {"exp_inf"}, set(), set()),
    ("Adadelta", {"square_avg", "acc_delta"}, set(), set()),
    ("RMSprop", {"square_avg"}, set(), set()),
    ("Adagrad", {"sum"}, set(), set()),
    ("ASGD", {"eta", "mu", "ax"}, set(), set()),
    ("Rprop", {"prev", "step_size"}, set(), set()),
    ("Lamb", {"exp_avg", "exp_avg_sq"}, {"max_coeff"}, set()),
    ("RAdam", {"exp_avg", "exp_avg_sq"}, {"decoupled_weight_decay"}, {"amsgrad"}),
    ("FusedAdam", {"exp_avg", "exp_avg_sq"}, {"bias_correction"}, set()),
    ("Adam or AdamW", {"exp_avg", "exp_avg_sq"}, set(), set()),
    ("Lion", {"exp_avg"}, set(), set()),
    ("SGD", {"momentum_buffer"}, set(), set()),
    ("SGD", set(), {"nesterov", "dampening"}, set()),
)


def canon(name: str) -> str:
    name = str(name).rsplit(".", 1)[-1]
    return re.sub(r"[^a-z0-9]", "", name.lower())


def family(name: str) -> str | None:
    c = canon(name)
    if c == "adamoradamw":
        return "adam"
    return next((f for f, members in FAMILIES.items() if c in members), None)


def from_state(summary: dict) -> str | None:
    state, groups = set(summary.get("state_keys") or ()), set(summary.get("group_keys") or ())
    for name, needs_state, needs_groups, excluded in SIGNATURES:
        if needs_state <= state and needs_groups <= groups and not (excluded & groups) and (needs_state or needs_groups):
            if name == "Adam or AdamW" and isinstance(summary.get("decoupled_weight_decay"), bool):
                return "AdamW" if summary["decoupled_weight_decay"] else "Adam"
            return name
    return None


def saved_type(metas, ds_config) -> tuple[str | None, str]:
    """(the saved optimizer's name, how it is known)."""
    for meta in metas:
        classes = [g for g in meta.globals_seen if g.startswith("torch.optim.") and family(g)]
        if classes:
            return classes[0].rsplit(".", 1)[-1], f"the pickle of {_base(meta.path)} names {classes[0]}"
    configured = (ds_config or {}).get("optimizer") if isinstance(ds_config, dict) else None
    if isinstance(configured, dict) and isinstance(configured.get("type"), str):
        return configured["type"], "the saved ds_config's optimizer.type"
    for meta in metas:
        if meta.optimizer:
            name = from_state(meta.optimizer)
            if name:
                keys = ", ".join(meta.optimizer["state_keys"]) or "none"
                return name, f"{_base(meta.path)}: state keys {keys}" + (
                    f", decoupled_weight_decay={meta.optimizer['decoupled_weight_decay']}"
                    if meta.optimizer.get("decoupled_weight_decay") is not None else "")
    return None, ""


def saved_groups(metas) -> tuple[int | None, str]:
    for meta in metas:
        if meta.optimizer and meta.optimizer.get("param_groups"):
            return meta.optimizer["param_groups"], f"{_base(meta.path)}: {meta.optimizer['source']}.param_groups"
    for meta in metas:
        if meta.param_shape_groups:
            return meta.param_shape_groups, f"{_base(meta.path)}: param_shapes (one entry per group)"
    return None, ""


def _base(path: str) -> str:
    return str(path).rsplit("/", 1)[-1]


def expected_type(ctx: ProbeContext) -> tuple[str | None, str]:
    target = ctx.target
    if target.optimizer:
        return target.optimizer, target.sources.get("optimizer", "--optimizer")
    configured = (target.config or {}).get("optimizer")
    if isinstance(configured, dict) and isinstance(configured.get("type"), str):
        return configured["type"], "--config optimizer.type"
    return None, ""


def probe(ctx: ProbeContext) -> ProbeResult:
    want_type, type_source = expected_type(ctx)
    want_groups = ctx.target.param_groups
    if want_type is None and want_groups is None:
        return outcome(NAME, signals=[], checked=[], complete=False, found="", clear="",
                       unknown="no --optimizer or --param-groups given to compare with", evidence=[], command="")
    listing = ctx.listing
    readable = listing is not None and listing.exists and not listing.error
    shards = [s for s in (first_optim_file(listing), first_model_file(listing)) if s] if readable else []
    metas = [m for m in (ctx.meta(s.name) for s in shards) if not m.error]
    layout = ctx.layout() if readable else None
    have_type, type_how = saved_type(metas, layout.ds_config if layout else None)
    have_groups, groups_how = saved_groups(metas)
    found = Findings()
    if want_type is not None:
        _compare_type(found, want_type, type_source, have_type, type_how)
    if want_groups is not None:
        _compare_groups(found, want_groups, have_groups, groups_how,
                        ctx.target.sources.get("param_groups", "--param-groups"))
    sample = ctx.q(ctx.ckpt.tag, shards[0].name) if shards else ""
    command = f"ds-triage inspect --optimizer {sample}" if sample else ""
    return outcome(NAME, signals=found.signals, checked=found.checked, complete=found.complete,
                   found="the optimizer the load builds differs from the saved one",
                   clear="the saved optimizer matches the one the load builds",
                   unknown="the checkpoint does not say enough about its optimizer",
                   evidence=found.evidence, context=found.context, command=command,
                   facts={"saved_type": have_type, "saved_param_groups": have_groups},
                   sources={k: v for k, v in (("optimizer", type_source if want_type else ""),
                                              ("param_groups", ctx.target.sources.get("param_groups", "--param-groups")
                                               if want_groups else "")) if v})


def _compare_type(found: Findings, want: str, want_how: str, have: str | None, have_how: str) -> None:
    if have is None:
        return found.unknown("the checkpoint does not say which optimizer saved it")
    if family(want) is None:
        found.context.append(f"{want!r} is not an optimizer ds-triage knows; compared by name")
    # Some saves name only the state layout (Adam-like, SGD-like), not the class.
    precise = canon(have) not in FAMILY_ONLY and canon(have) != "adamoradamw" and canon(want) not in FAMILY_ONLY
    same = canon(have) == canon(want) if precise else family(have) == family(want)
    line = f"saved {have} ({have_how}), the load builds {want} ({want_how})"
    if not same:
        why = (": its state keys differ, the restore fails (KeyError in step())"
               if family(have) != family(want) else ": same state layout, other update rule")
    else:
        why = "" if precise else ": same state layout (the class itself cannot be told)"
    found.compared("type_differs", not same, line + why)


def _compare_groups(found: Findings, want: int, have: int | None, have_how: str, want_how: str) -> None:
    if have is None:
        return found.unknown("the checkpoint does not say how many param groups it saved")
    line = f"param groups: saved {have} ({have_how}), the load builds {want} ({want_how})"
    why = ": 'loaded state dict has a different number of parameter groups'" if have != want else ""
    found.compared("groups_differ", have != want, line + why)
