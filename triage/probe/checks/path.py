"""path: does the path exist, is it a DeepSpeed checkpoint, is it the level `--load` needs?

Confirmed: it does not exist (not_found), holds no DeepSpeed checkpoint (no_checkpoint; a
Trainer dir with weights but no DeepSpeed state is no_deepspeed_state), or it is one level off
for `--load` (wrong_level: a tag dir, or a Trainer output dir above `checkpoint-N`).
"""

from __future__ import annotations

import os
import shlex

from triage.probe.context import ProbeContext
from triage.probe.result import ProbeResult, outcome

NAME = "path"
SIGNALS = ("not_found", "no_checkpoint", "no_deepspeed_state", "wrong_level")


def probe(ctx: ProbeContext) -> ProbeResult:
    ckpt = ctx.ckpt
    given = shlex.quote(ckpt.given)
    evidence: list[str] = []  # what is wrong
    context: list[str] = []
    signals: list[str] = []
    checked = ["not_found"]
    kind = ckpt.given_kind
    if kind == "missing":
        signals.append("not_found")
        evidence.append(f"{ckpt.given}: no such file or directory")
        return _result(signals, checked, evidence, context, f"ls -la {given}", complete=True)
    checked += ["no_checkpoint", "no_deepspeed_state"]
    if kind == "not_a_checkpoint":
        if ckpt.hf_weights:
            signals.append("no_deepspeed_state")
            evidence.append(f"{ckpt.given} holds {', '.join(ckpt.hf_weights)} but no `latest` and no global_step* "
                            "dir: a Trainer/HF checkpoint saved without DeepSpeed's engine state")
        elif os.path.isfile(ckpt.given):
            signals.append("no_checkpoint")
            evidence.append(f"{ckpt.given} is a file but not a DeepSpeed shard (*_model_states.pt, "
                            "*_optim_states.pt) or `latest`")
        else:
            signals.append("no_checkpoint")
            evidence.append(f"{ckpt.given}: no `latest` file and no tag dir with DeepSpeed shards "
                            "(*_model_states.pt, *_optim_states.pt) here")
        for path, error in ckpt.errors.items():
            context.append(f"could not list {path}: {error}")
        return _result(signals, checked, evidence, context, f"ls -la {given}", complete=not ckpt.errors)
    context.append(f"checkpoint root: {ckpt.root}")
    if kind in ("root", "tag_dir", "hf_output"):
        checked.append("wrong_level")
    if kind == "tag_dir":
        signals.append("wrong_level")
        evidence.append(f"{ckpt.given} is a tag dir (it holds the shards); DeepSpeed's --load / load_checkpoint(dir) "
                        f"must be its parent {ckpt.root}, which holds `latest`")
    elif kind == "hf_output":
        signals.append("wrong_level")
        evidence.append(f"{ckpt.given} is a Trainer output dir; the DeepSpeed checkpoint is {ckpt.root} "
                        "(resume_from_checkpoint / --load must name the checkpoint-N dir)")
    elif kind == "shard":
        context.append(f"given a shard file; its checkpoint root is {ckpt.root}, tag {ckpt.tag}")
    elif kind == "latest_file":
        context.append("given the `latest` file; its dir is the root")
    context.append(f"tags: {', '.join(ckpt.tags) if ckpt.tags else 'none'}; probing tag {ckpt.tag} "
                    f"(from {ckpt.tag_source})" if ckpt.tag else "no tag to probe")
    layout = ctx.layout()
    if layout is not None:
        context.append(f"saved layout: {layout.describe()}")
    return _result(signals, checked, evidence, context, f"ls -la {ctx.q()}; cat {ctx.q('latest')}", complete=True)


def _result(signals, checked, evidence, context, command, complete) -> ProbeResult:
    return outcome(NAME, signals=signals, checked=checked, complete=complete,
                   found="the path is not what --load needs", clear="the path is a DeepSpeed checkpoint root",
                   unknown="could not tell what the path is", evidence=evidence, context=context, command=command)
