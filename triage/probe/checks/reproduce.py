"""reproduce (`--reproduce`): DeepSpeed's own load of the checkpoint, for real, then its output
read back through the classifier.

Nothing loads before the trust gate (triage/probe/trust.py) has verified every file the load would
open: a suspicious or unverifiable one refuses the probe (exit 5) unless --trust-checkpoint.

torchrun on CPU (gloo) with the target world size, the target ds_config (--config, the one the
log printed, else the one saved in the checkpoint) and the model from --model-factory, or, without
one, a stand-in built from the saved param_shapes (triage/repair/twin.py). The load runs in
separate processes that import torch and DeepSpeed; nothing here does. The checkpoint is only
read: engine.load_checkpoint never writes. Confirmed when the load fails (`load_fails`), refuted
when it passes.
"""

from __future__ import annotations

import os
import shlex

from triage.probe import trust
from triage.probe.context import ProbeContext
from triage.probe.layout import first_model_file
from triage.probe.result import INCONCLUSIVE, ProbeResult, outcome

NAME = "reproduce"
TIMEOUT = 900


def probe(ctx: ProbeContext) -> ProbeResult:
    layout = ctx.layout()
    if ctx.ckpt.root is None or layout is None:
        return ProbeResult(NAME, INCONCLUSIVE, "no checkpoint tag to load", [], "")
    trusted = trust.gate(ctx.ckpt.tag_dir, ctx.trust_checkpoint, "probe --reproduce")  # before anything else
    model_file = first_model_file(ctx.listing)
    meta = ctx.meta(model_file.name) if model_file else None
    twin = [{k: list(v) for k, v in g.items()} for g in (meta.param_group_shapes or [])] if meta else []
    if not ctx.model_factory and not any(twin):
        return ProbeResult(NAME, INCONCLUSIVE, "no param_shapes saved to build a model from; name yours with "
                           "--model-factory MODULE:FUNCTION", [], "")
    world, world_source = _world_size(ctx, layout)
    config, config_source = _config(ctx, layout, world)
    if config is None:
        return ProbeResult(NAME, INCONCLUSIVE, "no ds_config to load with: give --config", [], "")

    from triage.repair import real_load
    from triage.repair.plan import LoadSpec

    load_dir = ctx.target.load_dir or ctx.ckpt.root
    tag = None if ctx.ckpt.tag_source == "latest" else ctx.ckpt.tag  # as the job would: `latest` decides
    spec = LoadSpec(mode="resume", load_dir=load_dir, tag=tag, world_size=world, config=config,
                    config_source=config_source)
    result = real_load.run(spec, ctx.model_factory, TIMEOUT, twin=None if ctx.model_factory else twin, reraise=True)
    model = f"--model-factory {ctx.model_factory}" if ctx.model_factory else (
        f"a stand-in with the {sum(map(len, twin))} saved parameters (param_shapes; a changed model is not reproduced)")
    context = [f"loaded {load_dir}" + (f", tag {tag}" if tag else " (tag from `latest`)") + f" on {world} rank(s) "
               f"({world_source}), ds_config: {config_source}", f"model: {model}",
               f"ran: {result.command} ({result.seconds:.1f} s)"]
    if trusted.trusted_note():
        context.insert(0, trusted.trusted_note())
    evidence, facts = [], {"load": result.to_json(), "trust": trusted.to_json()}
    if not result.ok:
        evidence.append(f"DeepSpeed's load failed: {result.detail}")
        report = _classified(result.output or "\n".join(result.log))
        if report is not None and report.hypotheses:
            facts["classification"] = report.to_json()
            evidence.append("its output reads as: " + "; ".join(
                f"{h.rule.id} {h.rule.category} ({h.confidence:.2f})" for h in report.hypotheses[:3]))
        else:  # nothing recognised: show how the output ended instead
            evidence.extend(f"  | {line}" for line in result.log[-6:])
    return outcome(
        NAME, signals=[] if result.ok else ["load_fails"], checked=["load_fails"], complete=True,
        found="DeepSpeed's own load of this checkpoint fails with this config and world size",
        clear=f"DeepSpeed's own load passed: {result.detail}", unknown="", evidence=evidence,
        command=_command(ctx, world), facts=facts, context=context)


def _world_size(ctx: ProbeContext, layout) -> tuple[int, str]:
    if ctx.target.world_size:
        return ctx.target.world_size, ctx.target.sources.get("world_size", "--world-size")
    return layout.world_size or 1, "as saved" if layout.world_size else "no saved degree: 1"


def _config(ctx: ProbeContext, layout, world: int) -> tuple[dict | None, str]:
    if ctx.target.config is not None:
        source = ctx.target.sources.get("config", "--config")
        return ctx.target.config, f"{ctx.target.config_path} ({source})" if ctx.target.config_path else source
    saved = layout.ds_config
    if saved is None:
        return None, ""
    config = dict(saved)
    if world != layout.world_size:
        # train_batch_size = micro batch x accumulation x world size: DeepSpeed rejects the
        # saved one at another world size before it loads anything.
        config.pop("train_batch_size", None)
    return config, "the ds_config saved in the checkpoint"


def _classified(text: str):
    if not text.strip():
        return None
    from triage.classify.classifier import classify
    from triage.kb import load_rules

    return classify(text, rules=load_rules())


def _command(ctx: ProbeContext, world: int) -> str:
    parts = ["ds-triage", "probe", ctx.ckpt.given, "--reproduce", "--world-size", str(world)]
    if ctx.target.config_path:
        parts += ["--config", ctx.target.config_path]
    if ctx.model_factory:
        parts += ["--model-factory", ctx.model_factory]
    return " ".join(shlex.quote(os.fspath(p)) for p in parts)
