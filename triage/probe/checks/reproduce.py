"""reproduce (`--reproduce`): DeepSpeed's own load of the checkpoint, for real, then its output
read back through the classifier.

It needs torch and DeepSpeed installed: the CLI exits 7 without them (triage/probe/deps.py), and this
probe is inconclusive, as it is when the load could not import them: that is no verdict on the
checkpoint. Nothing loads before the trust gate (triage/probe/trust.py) has verified every file
the load would open: a suspicious or unverifiable one refuses the probe (exit 5) unless
--trust-checkpoint.

torchrun on CPU (gloo), set up from every fact the target has (triage/probe/reproduction.py): its
world size, its ds_config with its ZeRO stage, the model from --model-factory or a stand-in built
from the saved param_shapes as the target says the job's model was (triage/repair/twin.py), its
optimizer. The report says which ds_config it loaded with, and the command that runs the same
reproduction again. The load runs in separate processes that import torch and DeepSpeed; nothing
here does. Its output is shown on stderr as it comes when progress is on; past --timeout it is
killed (exit 6). The checkpoint is only read: engine.load_checkpoint never writes. Confirmed when
the load fails (`load_fails`), refuted when it passes.
"""

from __future__ import annotations

import re

from triage import progress
from triage.probe import deps
from triage.probe import trust
from triage.probe.context import ProbeContext
from triage.probe.layout import first_model_file
from triage.probe.reproduction import Setup, rerun_command, setup
from triage.probe.result import INCONCLUSIVE, ProbeResult, outcome

NAME = "reproduce"
TIMEOUT = 900


def probe(ctx: ProbeContext) -> ProbeResult:
    layout = ctx.layout()
    if ctx.ckpt.root is None or layout is None:
        return ProbeResult(NAME, INCONCLUSIVE, "no checkpoint tag to load", [], "")
    gone = deps.missing(deps.LOAD)
    if gone:  # the CLI exits 7 before this; a library caller gets the probe that could not run
        return ProbeResult(NAME, INCONCLUSIVE, f"not run: {' and '.join(gone)} not installed here, so DeepSpeed's "
                           "own load cannot run", [f"install: {deps.INSTALL}"],
                           rerun_command(ctx, ctx.target.world_size or layout.dp or 1))
    # before anything else: the tag, and those `latest`/`latest_universal` name (the config may pick either)
    trusted = trust.gate(ctx.ckpt.root, ctx.ckpt.tag, ctx.trust_checkpoint, "probe --reproduce")
    model_file = first_model_file(ctx.listing)
    meta = ctx.meta(model_file.name) if model_file else None
    s = setup(ctx, layout, meta, ctx.model_factory)
    if isinstance(s, str):
        return ProbeResult(NAME, INCONCLUSIVE, s, [], "")

    from triage.repair import real_load
    from triage.repair.plan import LoadSpec

    spec = LoadSpec(mode="resume", load_dir=s.load_dir, tag=s.tag, world_size=s.world_size, config=s.config,
                    config_source=s.config_source)
    progress.write(f"reproduce: DeepSpeed's own load on {s.world_size} rank(s), ZeRO stage {s.stage}, ds_config: "
                   f"{s.config_source}" + (f"; {'; '.join(s.changes)}" if s.changes else ""))
    result = real_load.run(spec, ctx.model_factory, ctx.timeout or TIMEOUT, twin=s.twin, reraise=True,
                           optimizer=s.optimizer, label="reproduce: DeepSpeed load")
    context = s.describe() + [f"ran: {result.command} ({result.seconds:.1f} s)"]
    if trusted.trusted_note():
        context.insert(0, trusted.trusted_note())
    evidence, facts = [], {"load": result.to_json(), "trust": trusted.to_json()}
    unstarted = _environment(result)
    if unstarted:  # the load never reached the checkpoint: nothing was learnt about it
        found = ProbeResult(NAME, INCONCLUSIVE, f"DeepSpeed's own load could not start here: {unstarted}",
                            context + [f"install: {deps.INSTALL}"], rerun_command(ctx, s.world_size), facts=facts)
        found.load = _load_json(s, result)
        return found
    if not result.ok:
        evidence.append(f"DeepSpeed's load failed: {result.detail}")
        report = _classified(result.output or "\n".join(result.log))
        if report is not None and report.hypotheses:
            facts["classification"] = report.to_json()
            evidence.append("its output reads as: " + "; ".join(
                f"{h.rule.id} {h.rule.category} ({h.confidence:.2f})" for h in report.hypotheses[:3]))
        else:  # nothing recognised: show how the output ended instead
            evidence.extend(f"  | {line}" for line in result.log[-6:])
    found = outcome(
        NAME, signals=[] if result.ok else ["load_fails"], checked=["load_fails"], complete=True,
        found="DeepSpeed's own load of this checkpoint fails with this config and world size",
        clear=f"DeepSpeed's own load passed: {result.detail}", unknown="", evidence=evidence,
        command=rerun_command(ctx, s.world_size), facts=facts, context=context)
    found.load = _load_json(s, result)
    return found


# The interpreter's own torch or DeepSpeed missing (not a module a checkpoint's pickle names, such as
# deepspeed.runtime.fp16.loss_scaler on an older release: that is the load failing on this checkpoint).
_NO_RUNTIME = re.compile(r"No module named '(torch|deepspeed)'")


def _environment(result) -> str | None:
    """Why the load never started (torchrun or a rank could not import torch/DeepSpeed), or None."""
    if result.ok:
        return None
    found = _NO_RUNTIME.search(result.detail or "") or _NO_RUNTIME.search(result.output or "\n".join(result.log))
    return found.group(0) if found else None


def _load_json(s: Setup, result) -> dict:
    return dict(s.to_json(), ok=result.ok, seconds=round(result.seconds, 1), detail=result.detail,
                command=result.command)


def _classified(text: str):
    if not text.strip():
        return None
    from triage.classify.classifier import classify
    from triage.kb import load_rules

    return classify(text, rules=load_rules())
