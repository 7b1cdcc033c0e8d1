"""latest: is `latest` there, readable, and naming an existing tag? Which tags look complete?

Confirmed: `latest` is missing (latest_missing: a load without an explicit tag silently starts
from scratch) or names no existing tag / is empty (latest_dangling). An unreadable `latest` is
left to the permission probe (inconclusive here).
"""

from __future__ import annotations

import os

from triage.probe import confine
from triage.probe.checkpoint import name_layout
from triage.probe.context import ProbeContext
from triage.probe.layout import expected_files
from triage.probe.result import ProbeResult, outcome

NAME = "latest"
SIGNALS = ("latest_missing", "latest_dangling")
# Never found, only checked: clear when the tag probed is known to be the one the job loaded (the
# path given was the tag dir, or the log's checkpoint engine named a file in it). DeepSpeed prints
# no tag before it fails to find a file, and a job can pass load_checkpoint(tag=...) another tag
# than `latest`'s: until then a missing file cannot be ruled out.
TAG_UNCERTAIN = "tag_uncertain"


def tag_loaded(ctx: ProbeContext) -> bool:
    """The tag probed is the one the job loaded: the path given was it, the log named it (DeepSpeed's
    checkpoint engine opening a file of it, a framework that passes it), or the job passed no tag
    (a framework's frame says so) and `latest` names it."""
    ckpt, target = ctx.ckpt, ctx.target
    return bool(ckpt.tag) and (ckpt.tag_source == "given" or target.load_tag == ckpt.tag
                               or (target.loads_latest and ckpt.tag_source == "latest"))


def probe(ctx: ProbeContext) -> ProbeResult:
    ckpt = ctx.ckpt
    if ckpt.root is None:
        return outcome(NAME, signals=[], checked=[], complete=False, found="", clear="",
                       unknown="no checkpoint root to read `latest` from", evidence=[], command="")
    latest = ckpt.latest
    command = f"cat {ctx.q('latest')}; ls -la {ctx.q()}"
    evidence: list[str] = []
    context: list[str] = []
    signals: list[str] = []
    checked: list[str] = []
    complete = True
    tags = _describe_tags(ctx)
    if not latest.exists:
        checked += ["latest_missing", "latest_dangling"]
        signals.append("latest_missing")
        newest = tags["complete"][-1] if tags["complete"] else None
        evidence.append(f"{latest.path}: missing; load_checkpoint(dir) without a tag warns and returns (None, None)"
                        + (f"; the newest complete tag is {newest} (pass tag={newest!r} or restore `latest`)" if newest else ""))
    elif latest.refused:
        complete = False
        evidence.append(f"{latest.path}: {latest.refused}; see the path probe")
    elif latest.error:
        complete = False
        evidence.append(f"{latest.path}: cannot read it ({latest.error}); see the permission probe")
    elif latest.text and not confine.is_inside(ckpt.root, os.path.join(ckpt.root, latest.text)):
        complete = False
        evidence.append(f"`latest` names {confine.shown(latest.text)}, outside the checkpoint root: not followed; "
                        "see the path probe")
    else:
        checked += ["latest_missing", "latest_dangling"]
        text = latest.text or ""
        if not text:
            signals.append("latest_dangling")
            evidence.append(f"{latest.path} is empty")
        elif ckpt.has_tag_dir(text) is None:  # a checkpoint known from a listing that did not show the root
            complete = False
            context.append(f"`latest` names {confine.shown(text)}; whether {ckpt.root} holds it was not shown")
        elif not ckpt.has_tag_dir(text):
            signals.append("latest_dangling")
            evidence.append(f"`latest` names {confine.shown(text)}, but no such tag dir exists in {ckpt.root}")
        else:
            context.append(f"`latest` names {text!r}, which exists")
            if text in tags["incomplete"]:
                context.append(f"{text} looks incomplete by its file names (see completeness)")
    if tag_loaded(ctx):
        checked.append(TAG_UNCERTAIN)
    elif ckpt.tag:
        context.append(f"checked tag {ckpt.tag} ({ckpt.tag_source}); if the job passed load_checkpoint another tag, "
                       f"probe that one: ds-triage probe {ctx.q('TAG')}")
    if ckpt.tags:
        context.append(f"tags complete: {', '.join(tags['complete']) or 'none'}"
                        + (f"; incomplete: {', '.join(tags['incomplete'])}" if tags["incomplete"] else ""))
    return outcome(NAME, signals=signals, checked=checked, complete=complete,
                   found="`latest` does not lead to a tag", clear="`latest` names an existing tag",
                   unknown="could not read `latest`", evidence=evidence, context=context, command=command,
                   facts={"tags": tags})


def _describe_tags(ctx: ProbeContext) -> dict[str, list[str]]:
    """By file names (no pickle read): a tag with model states and, for ZeRO, one optimizer shard
    per data-parallel rank index seen, without gaps; the probed tag also by its saved degrees."""
    out = {"complete": [], "incomplete": [], "unlistable": []}
    for tag in ctx.ckpt.tags:
        listing = ctx.ckpt.listing(tag)
        if listing.error:
            out["unlistable"].append(tag)
            continue
        names = name_layout(listing)
        model = listing.of("model", "zero3_model")
        optim = listing.of("optim")
        ranks = {(s.dp, s.mp) for s in optim}
        whole = bool(model) or names.universal
        if names.stage_family == "1/2" and names.dp and names.mp:
            whole = whole and len(ranks) == names.dp * names.mp
        if names.stage_family == "3":
            zero3 = {(s.dp, s.mp) for s in listing.of("zero3_model")}
            whole = whole and bool(optim) and zero3 == ranks and len(ranks) == names.dp * names.mp
        if names.layers:
            whole = whole and len(names.layers) == names.layers[-1] + 1  # sorted and distinct: no gap
        if tag == ctx.ckpt.tag and whole:  # the probed tag: by its saved degrees too (as completeness does)
            layout = ctx.layout()
            expected = expected_files(layout) if layout else None
            if expected:
                present = {s.name for s in listing.shards}
                whole = all(n in present for n in expected["model"] + expected["optim"])
        out["complete" if whole else "incomplete"].append(tag)
    return out
