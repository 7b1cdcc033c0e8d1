"""weights_only: would torch.load(weights_only=True) refuse the tag's shards?

torch 2.6 made weights_only=True the default of torch.load; its unpickler admits tensors,
containers and plain types only. A DeepSpeed shard also pickles DeepSpeed's own objects (the
ZeRO stage enum, the loss scaler, fragment addresses), argparse's Namespace and numpy
scalars, so a plain torch.load of it fails, while engine.load_checkpoint (which passes
weights_only=False) reads it. The globals come from the restricted reader (safe_pickle):
nothing is imported or run.

Confirmed (refused_globals) when a shard pickles a global torch's weights_only unpickler
refuses. Every ZeRO checkpoint does, so this probe runs only for the causes that name it (a
weights_only load), never in `ds-triage probe`'s default set.
"""

from __future__ import annotations

import importlib.metadata as md
import os

from triage.probe.context import ProbeContext
from triage.probe.result import ProbeResult, outcome

NAME = "weights_only"
SIGNALS = ("refused_globals",)


def probe(ctx: ProbeContext) -> ProbeResult:
    listing = ctx.listing
    if listing is None or not listing.exists or listing.error or not listing.shards:
        return outcome(NAME, signals=[], checked=[], complete=False, found="", clear="",
                       unknown="no shard could be listed to check", evidence=[], command="")
    refused: dict[str, list[str]] = {}
    unread = []
    for shard in listing.shards:
        meta = ctx.meta(shard.name)
        if meta.error:
            unread.append(shard.name)
        elif meta.weights_only_refused:
            refused[shard.name] = meta.weights_only_refused
    evidence = [f"{name}: pickles {', '.join(globals_[:4])}{' ...' if len(globals_) > 4 else ''}, which "
                "torch.load(weights_only=True) refuses" for name, globals_ in list(refused.items())[:5]]
    if len(refused) > 5:
        evidence.append(f"... and {len(refused) - 5} more shard(s)")
    context = [f"torch installed here: {_torch_version()} (weights_only=True is torch.load's default since 2.6)"]
    if unread:
        context.append(f"not read: {', '.join(unread[:5])}")
    first = next(iter(refused), listing.shards[0].name)
    command = f"ds-triage inspect {ctx.q(ctx.ckpt.tag, first)} | grep -A20 globals"
    return outcome(NAME, signals=["refused_globals"] if refused else [], checked=list(SIGNALS),
                   complete=not unread,
                   found="torch.load(weights_only=True) refuses these shards: they pickle DeepSpeed's own objects",
                   clear="every shard reads with torch.load(weights_only=True)",
                   unknown="not every shard could be read", evidence=evidence, context=context,
                   command=command, facts={"refused": refused})


def _torch_version() -> str:
    try:
        return md.version("torch")
    except md.PackageNotFoundError:
        return "not installed"
