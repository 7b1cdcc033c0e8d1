"""The probe layer as a gate before a repair reads a tag: a broken tag is refused, not converted."""

from __future__ import annotations

from triage.probe import checks, confine
from triage.probe.result import CONFIRMED
from triage.repair.plan import Refused, Source

GATE = ("completeness", "permission", "integrity")
# completeness signals about the files that hold the weights (strip-optimizer needs only those)
# a pickle that would run code is the trust gate's (triage/probe/trust.py) at --apply: refused there
# (exit 5) unless --trust-checkpoint, which this gate could not honour
TRUST_SIGNALS = {"suspicious_pickle"}
WEIGHTS_SIGNALS = {"tag_missing", "tag_empty", "model_missing", "layer_missing"}


def require_whole(source: Source, action: str, only: set[str] | None = None) -> None:
    """Refuse a tag a probe finds broken. `only`: the file names the action reads; damage to other
    files (an optimizer shard strip-optimizer leaves out) does not count."""
    problems = []
    listing = source.ctx.listing
    for name, why in (listing.refused.items() if listing is not None else ()):
        # DeepSpeed's tools glob the tag themselves: they would open what the listing refused
        problems.append(f"path: {confine.shown(name)}: {why}")
    for r in checks.run(source.ctx, GATE).values():
        if r.status != CONFIRMED or set(r.signals) <= TRUST_SIGNALS:
            continue
        lines = r.headline or [r.summary]
        if only is not None:
            if r.name == "completeness" and not WEIGHTS_SIGNALS & set(r.signals):
                continue
            if r.name != "completeness":
                lines = [line for line in lines if any(line.startswith(f"{name}:") or f"/{name}" in line
                                                       for name in only)]
                if not lines:
                    continue
        problems.append(f"{r.name}: {lines[0]}")
    if problems:
        raise Refused(f"{source.tag_dir} is not whole, so `repair {action}` would fail or carry the damage over: "
                      + "; ".join(problems[:3]) + f". See `ds-triage probe {source.root}`")


def refuse_unless(condition: bool, message: str) -> None:
    if not condition:
        raise Refused(message)
