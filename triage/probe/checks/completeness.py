"""completeness: are all the shards the saved degrees require there, and can the target load them?

The saved degrees come from the metadata of one model-states file and one optimizer shard
(stage, dp_world_size, mp_world_size, bf16 naming). Every model-states file and optimizer shard
DeepSpeed writes for them must be present, pipeline layer files without gaps, and none extra.
With a target (--stage / --world-size, or what the job's log printed), it also checks that a
load at that stage and world size finds the files it looks for.

Confirmed: tag_missing (the tag dir does not exist), tag_empty, model_missing, optim_missing,
layer_missing, extra_shards, incomplete_save (files missing in a tag `latest` never named: a
save that died), stage_differs (saved ZeRO-3 vs a stage-1/2 load, or the reverse, or ZeRO-0
vs ZeRO), world_size_differs (a ZeRO or model-parallel checkpoint on another world size),
mp_differs (the load's model-parallel size is not the saved mp_world_size, whatever the world
size), pipeline_differs (pipeline layer files loaded by an engine that is no PipelineEngine, or
by one with another number of pipeline stages).

The load's settings come from --stage / --world-size / --config, else from the job's log
(triage/probe/target.py); `sources` in the result says which, for each.

Supports (no problem by themselves; they confirm a cause only the log names, verdict.SUPPORT):
model_parallel_saved, zero0_saved, not_universal, no_universal_info (the model states lack the
universal_checkpoint_info ds_to_universal needs), and world_size_differs when the world size is the
one the job's log printed: a load without optimizer states runs on any world size and prints the
same, so only the log's world-size error makes it the cause.
"""

from __future__ import annotations

from triage.probe.context import ProbeContext
from triage.probe.layout import MAX_LAYER, STAGE_FAMILY, expected_files, files_for_target, first_model_file, layer_gaps
from triage.probe.result import ProbeResult, outcome

NAME = "completeness"
SAVED = ("tag_missing", "tag_empty", "model_missing", "optim_missing", "layer_missing", "extra_shards", "incomplete_save")
TARGET = ("stage_differs", "world_size_differs", "mp_differs", "pipeline_differs")
SIGNALS = SAVED + TARGET


def probe(ctx: ProbeContext) -> ProbeResult:
    ckpt = ctx.ckpt
    listing = ctx.listing
    command = f"ls -la {ctx.q(ckpt.tag)}" if ckpt.tag else f"ls -la {ctx.q()}"
    evidence: list[str] = []  # what was found first, then the context (`context`)
    context: list[str] = []
    signals: list[str] = []
    checked: list[str] = []
    supports: list[str] = []  # what the checkpoint is, for the causes only a log names (verdict.SUPPORT)

    def result(complete: bool) -> ProbeResult:
        return outcome(NAME, signals=signals, checked=checked, complete=complete,
                       found="the checkpoint does not hold what this load needs",
                       clear="every shard the saved degrees require is present",
                       unknown="could not check every shard", evidence=evidence, context=context,
                       command=command, sources=_sources(ctx), supports=supports)

    if listing is None:
        evidence.append("no checkpoint tag to check")
        return result(False)
    if not listing.exists:
        checked.append("tag_missing")
        signals.append("tag_missing")
        evidence.append(f"tag dir {listing.path} does not exist")
        return result(True)
    if listing.error:
        evidence.append(f"cannot list {listing.path} ({listing.error}): which shards exist is unknown; "
                        "see the permission probe")
        return result(False)
    checked += ["tag_missing", "tag_empty"]
    if not listing.shards and not listing.universal:
        signals.append("tag_empty")
        evidence.append(f"{listing.path} holds no DeepSpeed shard"
                        + (f" (only {', '.join(listing.other[:5])})" if listing.other else ""))
        return result(True)
    layout = ctx.layout()
    context.append(f"saved: {layout.describe()}"
                   + (f"; stage from {layout.stage_source}" if layout.stage_source else ""))
    evidence += layout.notes
    complete = True
    if layout.names.universal or layout.names.experts:
        context.append("universal and MoE layouts: only the model-states files are checked")
    expected = expected_files(layout)
    present = {s.name for s in listing.shards}
    if expected is None:
        complete = False
        evidence.append("the saved stage or degrees are unknown (no readable model-states file or optimizer "
                        "shard): cannot say which shards should exist")
    else:
        checked += ["model_missing", "optim_missing", "extra_shards", "incomplete_save"]
        for kind, signal in (("model", "model_missing"), ("optim", "optim_missing")):
            if kind == "optim" and (layout.names.universal or layout.names.experts):
                continue
            missing = [n for n in expected[kind] if n not in present]
            if missing and kind == "model" and _converter_needs_one(ctx, layout, missing, expected[kind]):
                context.append(f"missing {len(missing)} of {len(expected[kind])} model-states files ("
                               + ", ".join(missing[:8]) + f"): zero_to_fp32 ({ctx.target.sources['reader']}) reads "
                               "the parameter shapes from the first one present; a resume on the engine needs them all")
                continue
            if missing:
                signals.append(signal)
                evidence.append(f"missing {len(missing)} of {len(expected[kind])} "
                                f"{'model-states files' if kind == 'model' else 'optimizer shards'}: "
                                + ", ".join(missing[:8]) + (" ..." if len(missing) > 8 else ""))
        wanted = set(expected["model"]) | set(expected["optim"])
        extra = [s.name for s in listing.of("model", "zero3_model", "optim") if s.name not in wanted]
        if extra and not layout.names.experts:
            signals.append("extra_shards")
            evidence.append(f"{len(extra)} shard(s) beyond what dp {layout.dp} x mp {layout.mp} writes "
                            f"(left from another save?): {', '.join(extra[:8])}")
        if signals and _save_died(ctx):
            signals.append("incomplete_save")
            evidence.append(f"`latest` does not name {ckpt.tag} and it is the newest tag: the save into it "
                            "probably died before finishing (preemption, OOM kill, full disk)")
    if layout.names.layers:
        checked.append("layer_missing")
        missing, gaps = layer_gaps(layout.names.layers)
        if missing:
            signals.append("layer_missing")
            evidence.append("pipeline layer files missing: " + ", ".join(f"layer_{i:02d}-model_states.pt" for i in gaps)
                            + (f" ... ({missing} in all)" if missing > len(gaps) else ""))
        if layout.names.layers[-1] > MAX_LAYER:
            evidence.append(f"a pipeline layer file numbered {layout.names.layers[-1]}: absurd (no model has more "
                            f"than {MAX_LAYER} layers); the file name is damaged or crafted")
    if not signals and expected is not None:
        context.insert(0, f"all {len(present)} shard(s) present for the saved degrees")
    _against_target(ctx, layout, evidence, context, signals, checked, supports)
    _against_parallel(ctx, layout, evidence, context, signals, checked)
    supports += _what_it_is(ctx, layout)
    return result(complete)


def _converter_needs_one(ctx: ProbeContext, layout, missing: list[str], expected: list[str]) -> bool:
    """The log's reader is zero_to_fp32, which takes the parameter shapes from the first model-states
    file it globs and the weights from the optimizer shards: the other ranks' model-states files are not
    read, unless ZeRO-3 saved frozen parameters (each rank's file holds its fragments of them)."""
    if ctx.target.reader != "zero_to_fp32" or len(missing) == len(expected):
        return False
    first = ctx.meta(next(n for n in expected if n not in missing))
    return layout.stage != 3 or (not first.error and not first.frozen_param_shapes)


def _what_it_is(ctx: ProbeContext, layout) -> list[str]:
    """Facts about the checkpoint that are no problem by themselves: model-parallel or pipeline,
    saved at stage 0, not a universal checkpoint, no universal_checkpoint_info in its model states."""
    facts = []
    if (layout.mp or 1) > 1 or layout.names.layers:
        facts.append("model_parallel_saved")
    if layout.stage == 0:
        facts.append("zero0_saved")
    if not layout.names.universal:
        facts.append("not_universal")
    model = first_model_file(ctx.listing)
    meta = ctx.meta(model.name) if model else None
    if meta is not None and not meta.error and meta.top_keys and "universal_checkpoint_info" not in meta.top_keys:
        facts.append("no_universal_info")
    return facts


def _save_died(ctx: ProbeContext) -> bool:
    ckpt = ctx.ckpt
    latest = ckpt.latest
    newest = bool(ckpt.tags) and ckpt.tags[-1] == ckpt.tag
    return newest and latest is not None and (not latest.exists or (latest.text and latest.text != ckpt.tag))


def _against_target(ctx: ProbeContext, layout, evidence: list[str], context: list[str], signals: list[str],
                    checked: list[str], supports: list[str]) -> None:
    target = ctx.target
    if target.stage is not None:
        saved = layout.stage_family
        if saved is None:
            context.append(f"target stage {target.describe('stage')}: the saved stage is unknown")
        else:
            checked.append("stage_differs")
            wanted = STAGE_FAMILY.get(target.stage)
            if wanted != saved:
                signals.append("stage_differs")
                evidence.append(
                    f"saved with ZeRO-{layout.stage if layout.stage is not None else saved}, loading with stage "
                    f"{target.describe('stage')}: a stage-{target.stage} load looks for "
                    f"{files_for_target(target.stage, layout.bf16)}"
                    + ("" if target.stage else " and keeps the optimizer state in it")
                    + f"; this tag has {_model_files(ctx)}")
            elif layout.stage is not None and layout.stage != target.stage:
                context.append(f"saved ZeRO-{layout.stage}, loading stage {target.describe('stage')}: DeepSpeed "
                               "loads ZeRO-1 and ZeRO-2 checkpoints into each other")
            else:
                context.append(f"stage {target.describe('stage')} as saved")
    if target.world_size is not None:
        saved_world = layout.world_size
        if saved_world is None:
            context.append(f"target world size {target.describe('world_size')}: the saved one is unknown")
            return
        if saved_world == target.world_size:
            checked.append("world_size_differs")
            context.append(f"world size {target.describe('world_size')} as saved")
        elif layout.names.universal:
            checked.append("world_size_differs")
            context.append(f"saved on {saved_world} rank(s), loading on {target.describe('world_size')}: a universal "
                           "checkpoint (zero/ folder) loads on any world size")
        elif layout.stage_family in ("0", None) and (layout.mp or 1) == 1:
            if layout.stage_family is None:  # a ZeRO-0 save, or a ZeRO-1/2 one whose optimizer shards are gone
                context.append(f"saved on {saved_world} rank(s), loading on {target.describe('world_size')}: "
                               "whether that matters is unknown (the saved ZeRO stage is unknown)")
                return
            checked.append("world_size_differs")
            context.append(f"saved on {saved_world} rank(s), loading on {target.describe('world_size')}: "
                            "ZeRO-0 checkpoints load on any data-parallel size")
        else:
            zero = layout.stage if layout.stage is not None else layout.stage_family
            split = (f"ZeRO-{zero} optimizer state is partitioned over dp {layout.dp}"
                     if layout.stage_family in ("1/2", "3")
                     else f"the model is split over {layout.mp} model-parallel ranks (mp_rank_* files)")
            line = (f"saved on {saved_world} rank(s) (dp {layout.dp} x mp {layout.mp or 1}), loading on "
                    f"{target.describe('world_size')}: {split}; resume on the same world size, convert with "
                    "ds_to_universal, or load without optimizer states")
            if _from_log(target, "world_size"):
                # a load that skips the optimizer state (load_optimizer_states=False) runs on any world
                # size and prints the same: beside a world-size error it is the cause, alone no fault
                supports.append("world_size_differs")
                context.append(line)
            else:
                checked.append("world_size_differs")
                signals.append("world_size_differs")
                evidence.append(line)


def _against_parallel(ctx: ProbeContext, layout, evidence: list[str], context: list[str], signals: list[str],
                      checked: list[str]) -> None:
    """The load's model-parallel size and pipeline against the saved mp_world_size and layer files."""
    target = ctx.target
    if target.mp is not None and layout.mp is not None:
        checked.append("mp_differs")
        if target.mp != layout.mp:
            signals.append("mp_differs")
            evidence.append(f"saved with model-parallel size {layout.mp} (mp_world_size; mp_rank_* files), loading "
                            f"with mp {target.describe('mp')}: each model-parallel rank reads its own mp_rank_XX "
                            "file; load with the saved tensor-parallel size (or reshape the checkpoint first)")
        else:
            context.append(f"model-parallel size {target.describe('mp')} as saved")
    saved_pipe = bool(layout.names.layers)
    if target.pipeline is False and saved_pipe:
        checked.append("pipeline_differs")
        signals.append("pipeline_differs")
        evidence.append(f"a pipeline checkpoint ({len(layout.names.layers)} layer_*-model_states.pt files) loaded by "
                        f"an engine that is no PipelineEngine ({target.sources.get('pipeline', '?')}): the weights "
                        "are in the layer files, which only a PipelineEngine reads; load it with the PipelineModule "
                        "it was saved from")
    elif target.pipeline is False:
        checked.append("pipeline_differs")
        context.append(f"no pipeline engine, as saved ({target.sources.get('pipeline', '?')})")
    elif target.pipeline and saved_pipe and target.pp is not None and layout.pp is not None:
        checked.append("pipeline_differs")
        if target.pp != layout.pp:
            signals.append("pipeline_differs")
            evidence.append(f"saved with {layout.pp} pipeline stages, loading with {target.describe('pp')}: the "
                            "stages' optimizer state and layer partitioning do not carry over")
        else:
            context.append(f"{layout.pp} pipeline stages as saved")


def _from_log(target, name: str) -> bool:
    """The load's setting was read from its log (or the launch command it echoes), not given."""
    return target.sources.get(name, "").startswith(("the log", "the launch command"))


def _sources(ctx: ProbeContext) -> dict[str, str]:
    """Where each of the load's settings this probe compares came from."""
    target = ctx.target
    return {name: target.sources[name] for name in ("stage", "world_size", "mp", "pipeline", "pp")
            if getattr(target, name) is not None and name in target.sources}


def _model_files(ctx: ProbeContext) -> str:
    listing = ctx.listing
    names = [s.name for s in listing.of("model", "zero3_model")]
    return ", ".join(names[:3]) + (" ..." if len(names) > 3 else "") if names else "no model-states file"
