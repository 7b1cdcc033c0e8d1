"""config: the ds_config saved in the checkpoint vs the one the load uses (--config, else the
one DeepSpeed printed in the failing job's log: triage/probe/log_facts.py).

FIELDS is the table: each setting, where it sits in a ds_config, its default, and what a change
does to loading. A change with a signal breaks the load (confirmed); the others are listed as
evidence (they load, but change the training): offload, batch sizes, gradient accumulation.

Confirmed: stage_differs (ZeRO stage family 0 / 1-2 / 3 changed), precision_differs (bf16 or
fp16 switched: the optimizer shards are named and shaped differently), tp_differs / pp_differs
(a tensor- or pipeline-parallel degree in the config differs from the saved one), universal_differs
(a universal checkpoint, ds_to_universal's `zero/` folder, loaded without checkpoint.load_universal,
or load_universal set for a tag that was never converted).
"""

from __future__ import annotations

import json
import shlex

from triage.probe.context import ProbeContext
from triage.probe.layout import STAGE_FAMILY
from triage.probe.pickle_bounds import shown
from triage.probe.result import ProbeResult, outcome

NAME = "config"
SIGNALS = ("stage_differs", "precision_differs", "tp_differs", "pp_differs", "universal_differs")

# (label, dotted path, default, signal or None, how to compare: "family" | "bool" | "value")
FIELDS = (
    ("ZeRO stage", "zero_optimization.stage", 0, "stage_differs", "family"),
    ("bf16", "bf16.enabled", False, "precision_differs", "bool"),
    ("fp16", "fp16.enabled", False, "precision_differs", "bool"),
    ("optimizer offload", "zero_optimization.offload_optimizer.device", "none", None, "value"),
    ("parameter offload", "zero_optimization.offload_param.device", "none", None, "value"),
    ("train_batch_size", "train_batch_size", None, None, "value"),
    ("train_micro_batch_size_per_gpu", "train_micro_batch_size_per_gpu", None, None, "value"),
    ("gradient_accumulation_steps", "gradient_accumulation_steps", 1, None, "value"),
    ("tensor parallel (autotp_size)", "tensor_parallel.autotp_size", None, "tp_differs", "value"),
    ("pipeline stages", "pipeline.stages", None, "pp_differs", "int"),
)


def lookup(config: dict, dotted: str, default):
    node = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def _same(kind: str, saved, mine) -> bool:
    if kind == "family":
        return STAGE_FAMILY.get(saved) == STAGE_FAMILY.get(mine)
    if kind == "bool":
        return bool(saved) == bool(mine)
    if kind == "int" and not (isinstance(saved, int) and isinstance(mine, int)):
        return True  # "auto" or unset: nothing to compare
    return saved == mine


def probe(ctx: ProbeContext) -> ProbeResult:
    target = ctx.target
    if target.config is None:
        return _without_config(ctx)
    layout = ctx.layout()
    saved = layout.ds_config if layout else None
    if saved is None:
        return outcome(NAME, signals=[], checked=[], complete=False, found="", clear="",
                       unknown="the checkpoint's saved ds_config could not be read",
                       evidence=["no readable model-states file or optimizer shard holds ds_config"], command="")
    evidence: list[str] = []  # the changes that break the load
    context: list[str] = []  # the others
    signals: list[str] = []
    for label, dotted, default, signal, kind in FIELDS:
        before, after = lookup(saved, dotted, default), lookup(target.config, dotted, default)
        if signal == "stage_differs" and target.sources.get("stage") == "--stage":
            after = target.stage  # the stage the user says the load uses wins over any config
        if before is None and after is None:
            continue
        if _same(kind, before, after):
            if kind == "family" and before != after:
                context.append(f"{label}: saved {before}, config {after} (ZeRO-1 and -2 load into each other)")
            continue
        if signal:
            signals.append(signal)
            evidence.append(f"{label} ({dotted}): saved {shown(before)}, your config {shown(after)}: breaks the load")
        else:
            context.append(f"{label} ({dotted}): saved {shown(before)}, your config {shown(after)} "
                           "(loads; changes training)")
    _degrees(layout, target.config, signals, evidence)
    _universal(ctx, layout, target.config, signals, evidence)
    if not signals:
        context.insert(0, "stage, precision and parallel degrees match the saved ds_config")
    shard = _shard(ctx)
    if not shard:
        command = ""
    elif target.config_path:
        command = (f"diff <(ds-triage inspect --config {shard}) "
                   f"<(python3 -m json.tool --sort-keys {_q(target.config_path)})")
    else:  # the config DeepSpeed printed in the log: show the saved one beside it
        command = f"ds-triage inspect --config {shard}"
        context.append(f"your config: the ds_config DeepSpeed printed in {target.sources.get('config', 'the log')}")
    checked = ["stage_differs", "precision_differs", "universal_differs"]
    if isinstance(lookup(target.config, "tensor_parallel.autotp_size", None), int):
        checked.append("tp_differs")
    if isinstance(lookup(target.config, "pipeline.stages", None), int):
        checked.append("pp_differs")
    return outcome(NAME, signals=signals, checked=checked, complete=True,
                   found="your ds_config differs from the saved one in a way that breaks loading",
                   clear="your ds_config is compatible with the saved one", unknown="",
                   evidence=evidence, context=context, command=command,
                   facts={"saved_config": json.loads(json.dumps(saved, default=str))},
                   sources={"config": target.config_path and "--config" or target.sources.get("config", "?")})


def _without_config(ctx: ProbeContext) -> ProbeResult:
    """No ds_config of the load: what its log still says of its precision and stage. The precision
    DeepSpeed printed, else the optimizer shard name the load could not open (bf16_ or not); the stage
    family its empty model-states lookup implies, where the tag it loaded holds the other naming."""
    target = ctx.target
    layout = ctx.layout()
    signals: list[str] = []
    checked: list[str] = []
    evidence: list[str] = []
    context: list[str] = []
    sources: dict[str, str] = {}
    has_optim = bool(ctx.listing and ctx.listing.exists and ctx.listing.of("optim"))
    _precision(target, layout, has_optim, signals, checked, evidence, context, sources)
    _stage_by_elimination(ctx, layout, signals, checked, evidence, context, sources)
    if not checked and not evidence:
        return outcome(NAME, signals=[], checked=[], complete=False, found="", clear="",
                       unknown="no --config given to compare with", evidence=context, command="", sources=sources)
    return outcome(NAME, signals=signals, checked=checked, complete=False,
                   found="the load's settings differ from the saved ones in a way that breaks loading",
                   clear="", unknown="no ds_config of the load to compare beyond what its log shows",
                   evidence=evidence, context=context, command=_shard(ctx) and
                   f"ds-triage inspect --config {_shard(ctx)}" or "", sources=sources)


def _precision(target, layout, has_optim: bool, signals, checked, evidence, context, sources) -> None:
    if target.precision is not None:
        saved = saved_precision(layout)
        sources["precision"] = target.sources.get("precision", "?")
        if saved is None:
            evidence.append(f"the load runs {target.describe('precision')}; the saved precision could not be read")
            return
        differs, line = saved != target.precision, f"precision: saved {saved}, the load {target.describe('precision')}"
    elif target.bf16_naming is not None and layout is not None and has_optim:
        sources["bf16_naming"] = target.sources.get("bf16_naming", "?")
        wanted = "bf16_zero_pp_rank_*" if target.bf16_naming else "zero_pp_rank_* (no bf16_ prefix)"
        saved_names = "bf16_zero_pp_rank_*" if layout.bf16 else "zero_pp_rank_* (no bf16_ prefix)"
        differs = bool(layout.bf16) != target.bf16_naming
        line = (f"optimizer shards: the load asked for {wanted} ({sources['bf16_naming']}), the tag holds "
                f"{saved_names}: saved {'with' if layout.bf16 else 'without'} bf16, loaded "
                f"{'with' if target.bf16_naming else 'without'}")
    else:
        return
    checked.append("precision_differs")
    if differs:
        signals.append("precision_differs")
        evidence.append(line + ": the optimizer shards are named and shaped per precision")
    else:
        context.append(line)


def _stage_by_elimination(ctx: ProbeContext, layout, signals, checked, evidence, context, sources) -> None:
    """The load found no model-states file named for its stage in the tag it loaded (check_ckpt_list's
    bare assert), and that tag holds a whole set named for the saved stage, readable by the job: so
    the load's stage names them the other way (ZeRO-3 against 0-2). Only where nothing else explains
    the empty lookup: another tag, a missing or unreadable file, a pipeline checkpoint, a load dir one
    level off."""
    from triage.probe.checks.latest import tag_loaded

    target = ctx.target
    if target.stage is not None or not target.no_model_states or layout is None or layout.stage_family is None:
        return
    permission, completeness = ctx.results.get("permission"), ctx.results.get("completeness")
    explained = ("tag_missing", "tag_empty", "model_missing", "layer_missing", "incomplete_save")
    path = ctx.results.get("path")
    # the dir the load looked in must be this checkpoint: not one known to be a level off, nor a tag
    # dir given with no word of what the job passed (it may have passed just that: one level off). A
    # Trainer output dir is not one: the Trainer hands DeepSpeed the checkpoint-N inside it.
    if ((path is not None and "wrong_level" in path.signals)
            or (ctx.ckpt.given_kind == "tag_dir" and target.load_dir is None)):
        return
    if (not tag_loaded(ctx) or permission is None or permission.status != "refuted" or completeness is None
            or any(s in completeness.signals for s in explained) or ctx.listing.of("layer")
            or not ctx.listing.of("model", "zero3_model")):
        return
    sources["stage"] = target.sources.get("no_model_states", "?")
    checked.append("stage_differs")
    saved_three = layout.stage_family == "3"
    signals.append("stage_differs")
    evidence.append(
        f"the load found no model-states file in {ctx.ckpt.tag} (the bare assert in check_ckpt_list, "
        f"{sources['stage']}), which holds {_names(ctx)}, saved with ZeRO-"
        f"{layout.stage if layout.stage is not None else layout.stage_family}: the loading engine looks for "
        + ("mp_rank_*_model_states.pt, so it runs ZeRO stage 0, 1 or 2" if saved_three
           else "zero_pp_rank_*_mp_rank_*_model_states.pt, so it runs ZeRO-3"))


def _names(ctx: ProbeContext) -> str:
    names = [s.name for s in ctx.listing.of("model", "zero3_model")]
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def saved_precision(layout) -> str | None:
    """fp32, bf16 or fp16 as the checkpoint was saved: its ds_config, else the bf16_ file names."""
    from triage.probe.target import config_precision

    if layout is None:
        return None
    if layout.ds_config is not None:
        return config_precision(layout.ds_config)
    return "bf16" if layout.bf16 else None


def _degrees(layout, config: dict, signals: list[str], evidence: list[str]) -> None:
    tp = lookup(config, "tensor_parallel.autotp_size", None)
    if isinstance(tp, int) and layout.tp is not None and tp != layout.tp and "tp_differs" not in signals:
        signals.append("tp_differs")
        evidence.append(f"tensor parallel: saved tp_degree {layout.tp}, your config autotp_size {tp}")


def _universal(ctx: ProbeContext, layout, config: dict, signals: list[str], evidence: list[str]) -> None:
    """A universal tag needs checkpoint.load_universal; a regular one must not have it."""
    wants = bool(lookup(config, "checkpoint.load_universal", False))
    if layout.names.universal and not wants and not ctx.listing.of("optim", "zero3_model"):
        signals.append("universal_differs")
        evidence.append(f"{ctx.ckpt.tag} is a universal checkpoint (ds_to_universal's zero/ folder, no ZeRO shards) "
                        "and your config does not set checkpoint.load_universal: DeepSpeed looks for "
                        "zero_pp_rank_*_optim_states.pt in it (FileNotFoundError), or with load_optimizer_states=False "
                        "restores the weights alone. Set \"checkpoint\": {\"load_universal\": true}")
    elif wants and not layout.names.universal:
        signals.append("universal_differs")
        evidence.append(f"your config sets checkpoint.load_universal but {ctx.ckpt.tag} is a regular checkpoint (no "
                        "zero/ folder): convert it with ds_to_universal first, or drop load_universal")


def _shard(ctx: ProbeContext) -> str | None:
    listing = ctx.listing
    shards = listing.of("model", "zero3_model", "optim") if listing else []
    return ctx.q(ctx.ckpt.tag, shards[0].name) if shards else None


def _q(path) -> str:
    return shlex.quote(str(path))
