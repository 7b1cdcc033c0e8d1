"""integrity: is every shard of the tag a whole torch.save archive whose pickle is harmless?

Per shard: the zip structure (zipcheck: empty, zeroed, garbage, Git LFS pointer, truncated, a
broken record; with --deep the CRC of every record, read by deep_scan's one pass over the tag), then
its pickle walked by the restricted
reader (safe_pickle): unreadable (bad_pickle), naming a global outside the allow-list
(suspicious_pickle: never executed), or referring to a storage record the archive does not hold
or holds short (storage_missing).

Confirmed: any of those signals on any shard. Inconclusive when a shard could not be opened
(permission) or is in torch's legacy non-zip format.
"""

from __future__ import annotations

import os
import shlex

from triage.probe import zipcheck
from triage.probe.context import ProbeContext
from triage.probe.result import ProbeResult, outcome

NAME = "integrity"
SIGNALS = ("empty", "zeroed", "garbage", "lfs_pointer", "truncated", "bad_zip", "crc_mismatch",
           "bad_pickle", "storage_missing", "suspicious_pickle")


def probe(ctx: ProbeContext) -> ProbeResult:
    listing = ctx.listing
    if listing is None or not listing.exists or listing.error:
        return outcome(NAME, signals=[], checked=[], complete=False, found="", clear="",
                       unknown="no shard could be listed to check", evidence=[], command="")
    evidence: list[str] = []
    context: list[str] = []
    signals: list[str] = []
    bad: list[str] = []
    complete = True
    checked_files = 0
    for shard in listing.shards:
        path = os.path.join(listing.path, shard.name)
        z = zipcheck.check(path)
        if ctx.deep and z.ok:
            _deep_crc(ctx, shard.name, z)
        if z.unreadable:
            complete = False
            context.append(f"{shard.name}: not checked, cannot open it ({z.unreadable})")
            continue
        if z.legacy:
            complete = False
            context.append(f"{shard.name}: {z.detail}; not checked")
            continue
        checked_files += 1
        if z.problem:
            signals.append(z.problem)
            bad.append(path)
            evidence.append(f"{shard.name}: {z.problem}: {z.detail}")
            continue
        meta = ctx.meta(shard.name)
        if meta.over_cap:
            signals.append("suspicious_pickle")
            bad.append(path)
            evidence.append(f"{shard.name}: its pickle goes over the safe reader's cap ({meta.over_cap}), which no "
                            "DeepSpeed checkpoint's metadata comes near: built to exhaust memory or time. Not read "
                            "further; do not load this file")
            continue
        if meta.error:
            signals.append("bad_pickle")
            bad.append(path)
            evidence.append(f"{shard.name}: its pickle (data.pkl) cannot be read: {meta.error}")
            continue
        if meta.suspicious:
            signals.append("suspicious_pickle")
            bad.append(path)
            evidence.append(f"{shard.name}: its pickle names {', '.join(meta.suspicious[:5])}, which no DeepSpeed "
                            "checkpoint needs: torch.load(weights_only=False) would run it. Not executed here; "
                            "do not load this file")
        short = _storage_problems(meta, z.records)
        if short:
            signals.append("storage_missing")
            bad.append(path)
            evidence.append(f"{shard.name}: {short}")
    if not signals:
        context.append(f"{checked_files} of {len(listing.shards)} shard(s) checked: zip structure whole"
                        + (", every record's CRC-32 verified" if ctx.deep else " (--deep also checks every CRC-32)")
                        + ", pickles readable with DeepSpeed's globals only")
    target = shlex.quote(bad[0]) if bad else ctx.q(ctx.ckpt.tag, listing.shards[0].name) if listing.shards else ""
    command = f"python3 -m zipfile -t {target}" if target else ""
    return outcome(NAME, signals=signals, checked=list(SIGNALS) if complete else [], complete=complete,
                   found="a shard is damaged or unsafe", clear="every shard is a whole torch.save archive",
                   unknown="not every shard could be checked", evidence=evidence, context=context, command=command)


def _deep_crc(ctx: ProbeContext, name: str, z: zipcheck.ZipCheck) -> None:
    """--deep: the CRC-32 of every record, from the one pass that also serves the consistency probe."""
    from triage.probe import deep_scan

    scan = deep_scan.scan(ctx)
    if scan.crc.get(name):
        z.problem, z.detail = "crc_mismatch", scan.crc[name]
    elif name in scan.unreadable:
        z.unreadable = scan.unreadable[name]


def _storage_problems(meta, records: dict[str, int]) -> str | None:
    prefix = meta.prefix + "/" if meta.prefix else ""
    for key, storage in meta.storages.items():
        name = f"{prefix}data/{key}"
        if name not in records:
            return f"the pickle refers to tensor storage {key!r} but the archive has no record {name}"
        if records[name] < storage.nbytes:
            return (f"tensor storage record {name} holds {records[name]} bytes, the pickle needs "
                    f"{storage.nbytes} ({storage.numel} x {storage.dtype})")
    return None
