"""The probes, one module each, in the order a person should verify: path -> permission ->
integrity -> version -> config -> model -> optimizer (`latest` and `completeness` belong to the
path phase), then with --deep consistency."""

from __future__ import annotations

import importlib

from triage.probe.context import ProbeContext
from triage.probe.result import ProbeResult, not_implemented

ORDER = ("path", "latest", "completeness", "permission", "integrity", "version", "config", "model", "optimizer")
# Run only when a hypothesis names them (or `probe` is given what they need): weights_only's
# "problem" is true of every healthy ZeRO shard (they pickle DeepSpeed objects); memory judges
# the host the load runs on, which `probe` alone cannot assume is this one.
ON_REQUEST = ("weights_only", "memory")
# Only with --deep (it reads every byte of the tag): the shards checked against each other.
DEEP = ("consistency",)
# Last, and only with --reproduce: a real DeepSpeed load under torchrun (seconds to minutes).
REPRODUCE = "reproduce"


def run(ctx: ProbeContext, names=ORDER) -> dict[str, ProbeResult]:
    """Run `names` (in ORDER, then the others; an unknown name is inconclusive; `reproduce` last,
    when the context asks for it); results keyed by name."""
    wanted = [n for n in ORDER if n in names] + [n for n in names if n not in ORDER and n != REPRODUCE]
    if ctx.deep:
        wanted += [n for n in DEEP if n not in wanted]
    if ctx.reproduce:
        wanted.append(REPRODUCE)
    results: dict[str, ProbeResult] = {}
    for name in dict.fromkeys(wanted):
        if name in ORDER or name in ON_REQUEST or name in DEEP or name == REPRODUCE:
            module = importlib.import_module(f"triage.probe.checks.{name}")
            results[name] = ctx.run_probe(module)
        else:
            results[name] = not_implemented(name)
        ctx.results[name] = results[name]
    return results
