"""The probes, one module each, in the order a person should verify: path -> permission ->
integrity -> version -> config -> model -> optimizer (`latest` and `completeness` belong to the
path phase)."""

from __future__ import annotations

import importlib

from triage.probe.context import ProbeContext
from triage.probe.result import ProbeResult, not_implemented

ORDER = ("path", "latest", "completeness", "permission", "integrity", "version", "config", "model", "optimizer")
# Run only when a hypothesis names them: their "problem" is true of every healthy checkpoint
# (e.g. weights_only: every ZeRO shard pickles DeepSpeed objects), so `probe` leaves them out.
ON_REQUEST = ("weights_only",)
# Named by rules (rules/schema.json `probes`) but not built yet: reported as inconclusive.
PLANNED = ("world_size", "memory")


def run(ctx: ProbeContext, names=ORDER) -> dict[str, ProbeResult]:
    """Run `names` (in ORDER, unknown or planned ones as inconclusive); results keyed by name."""
    wanted = set(names)
    results: dict[str, ProbeResult] = {}
    for name in ORDER + tuple(n for n in names if n not in ORDER):
        if name not in wanted:
            continue
        if name in ORDER or name in ON_REQUEST:
            module = importlib.import_module(f"triage.probe.checks.{name}")
            results[name] = module.probe(ctx)
        else:
            results[name] = not_implemented(name)
        ctx.results[name] = results[name]
    return results
