"""path: does the path exist, is it a DeepSpeed checkpoint, is it the level `--load` needs?

Confirmed: it does not exist (not_found), holds no DeepSpeed checkpoint (no_checkpoint; a
Trainer dir with weights but no DeepSpeed state is no_deepspeed_state; neither when `triage`'s log
shows a job that never used DeepSpeed and did not fail), or the dir the job
passes to `load_checkpoint` is one level off (wrong_level: a tag dir, or a Trainer output dir
above `checkpoint-N`), or something in it was not followed (unsafe_path: `latest`, a tag dir or a
shard that leads outside the checkpoint root, a symlink loop, a FIFO, device or socket where a file
should be, or a hard link with a name outside the root, which may be any file on the machine; see
probe/confine.py). None of them is opened, so none is read by another probe either.

The path probed is whatever the user has at hand (a tag dir, a shard), so its own level is
no fault. The level is judged on the target's load dir: `--load-dir`, or in `triage` the dir
the log names (DeepSpeed's "Unable to find latest file at DIR/latest"), else `--ckpt`.
"""

from __future__ import annotations

import os
import shlex

from triage.probe import confine, framework_files
from triage.probe.context import ProbeContext
from triage.probe.result import ProbeResult, outcome

NAME = "path"
SIGNALS = ("not_found", "no_checkpoint", "no_deepspeed_state", "wrong_level", "unsafe_path", "named_missing")


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
        if ctx.target.without_deepspeed:
            held = f"holds {', '.join(ckpt.hf_weights)} and " if ckpt.hf_weights else "holds "
            context.append(f"{ckpt.given} {held}no DeepSpeed state, and the log shows no DeepSpeed and no failure: "
                           "a job that never needed it (a from_pretrained or PEFT load, a run saving a model)")
        elif ckpt.hf_weights:
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
        _named_files(ctx, signals, checked, evidence, context)
        clear = "not a DeepSpeed checkpoint, and the job did not need one" if ctx.target.without_deepspeed else None
        return _result(signals, checked, evidence, context, f"ls -la {given}", complete=not ckpt.errors, clear=clear)
    context.append(f"checkpoint root: {ckpt.root}")
    load_dir = ctx.target.load_dir
    if load_dir is None:
        if kind in ("tag_dir", "hf_output"):
            context.append(f"given a {kind.replace('_', ' ')}; probing its checkpoint {ckpt.root} (if the job passes "
                           f"{ckpt.given} to load_checkpoint / --load, that is one level off: use --load-dir to check)")
    else:
        level = _wrong_level(load_dir, ckpt, kind, ctx.target.sources.get("load_dir", "--load-dir"))
        checked.append("wrong_level")
        if level:
            signals.append("wrong_level")
            evidence.append(level)
    if kind == "shard":
        context.append(f"given a shard file; its checkpoint root is {ckpt.root}, tag {ckpt.tag}")
    elif kind == "latest_file":
        context.append("given the `latest` file; its dir is the root")
    context.append(f"tags: {', '.join(ckpt.tags) if ckpt.tags else 'none'}; probing tag {ckpt.tag} "
                    f"(from {ckpt.tag_source})" if ckpt.tag else "no tag to probe")
    checked.append("unsafe_path")
    unsafe = _unsafe_paths(ctx)
    if unsafe:
        signals.append("unsafe_path")
        evidence += unsafe
    _named_files(ctx, signals, checked, evidence, context)
    layout = ctx.layout()
    if layout is not None:
        context.append(f"saved layout: {layout.describe()}")
    return _result(signals, checked, evidence, context, f"ls -la {ctx.q()}; cat {ctx.q('latest')}", complete=True)


def _named_files(ctx: ProbeContext, signals, checked, evidence, context) -> None:
    """The files the failing load could not find (the log names them: a Trainer's trainer_state.json,
    accelerate's scheduler.bin, a shard), looked up in the dir given: named_missing when one is not
    there. Each is placed by the longest end of its path whose parent dir exists here."""
    base = framework_files.base(ctx.ckpt.given)
    for named, source in ctx.target.missing_paths:
        here = _placed(base, named)
        if here is None:
            continue
        if "named_missing" not in checked:
            checked.append("named_missing")
        shown = confine.shown(os.path.relpath(here, base))
        if os.path.lexists(here):
            context.append(f"{shown}, which the load could not find ({named}, {source}), is here")
        else:
            if "named_missing" not in signals:
                signals.append("named_missing")
            evidence.append(f"{shown} is not in {ctx.ckpt.given}: the file the load could not find ({named}, {source})")


def _placed(base: str, named: str) -> str | None:
    """`named` (a path from another host's log) inside `base`: its longest tail whose parent exists
    under base, confined to it; None for a path with `..` or nothing to place."""
    parts = [p for p in named.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        return None
    for keep in range(len(parts), 0, -1):
        tail = parts[len(parts) - keep:]
        parent = os.path.join(base, *tail[:-1])
        if os.path.isdir(parent) and confine.is_inside(base, os.path.join(parent, tail[-1])):
            return os.path.join(parent, tail[-1])
    return None


def _unsafe_paths(ctx: ProbeContext) -> list[str]:
    """What the checkpoint plants that was refused: never followed, never read, never printed. The
    framework's files beside the shards (scheduler.pt, rng_state.pth) are read too: a hard link or a
    FIFO among them is named here."""
    out = [f"{path}: {why}" for path, why in ctx.ckpt.refused.items()]
    listing = ctx.listing
    if listing is not None:
        if listing.error and "outside the checkpoint root" in listing.error:
            out.append(f"tag {confine.shown(listing.tag)}: {listing.error}")
        out += [f"{listing.tag}/{confine.shown(name)}: {why}" for name, why in listing.refused.items()]
    base = framework_files.base(ctx.ckpt.given)
    for path in framework_files.find(base):
        why = confine.refusal(base, path)
        if why:
            out.append(f"{confine.shown(os.path.relpath(path, base))}: {why}")
    return out


def _wrong_level(load_dir: str, ckpt, given_kind: str, source: str) -> str:
    """Why `load_dir` is one level off for load_checkpoint, or "" when it is a root (or unknown)."""
    from triage.probe.checkpoint import locate

    same = os.path.abspath(load_dir) == os.path.abspath(ckpt.given)
    found = locate(load_dir)
    kind = given_kind if same else found.given_kind
    if kind == "not_a_checkpoint" and ckpt.root and os.path.abspath(load_dir) == os.path.dirname(
            os.path.abspath(ckpt.root)):
        return (f"the load dir {load_dir} ({source}) is the parent of the checkpoint {ckpt.root}: it holds no "
                "`latest`; load_checkpoint(dir) must name the checkpoint root itself")
    if kind == "tag_dir":
        return (f"the load dir {load_dir} ({source}) is a tag dir (it holds the shards); DeepSpeed's --load / "
                f"load_checkpoint(dir) must be its parent {found.root}, which holds `latest`")
    if kind == "hf_output":
        return (f"the load dir {load_dir} ({source}) is a Trainer output dir; the DeepSpeed checkpoint is "
                f"{found.root} (resume_from_checkpoint / --load must name the checkpoint-N dir)")
    return ""


def _result(signals, checked, evidence, context, command, complete, clear=None) -> ProbeResult:
    return outcome(NAME, signals=signals, checked=checked, complete=complete,
                   found="the path is not what --load needs", clear=clear or "the path is a DeepSpeed checkpoint root",
                   unknown="could not tell what the path is", evidence=evidence, context=context, command=command)
