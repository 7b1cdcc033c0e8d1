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
from dataclasses import dataclass, field

from triage import progress
from triage.probe import zipcheck
from triage.probe.context import ProbeContext
from triage.probe.result import Findings, ProbeResult, outcome

NAME = "integrity"
SIGNALS = ("empty", "zeroed", "garbage", "lfs_pointer", "truncated", "bad_zip", "crc_mismatch",
           "bad_pickle", "storage_missing", "suspicious_pickle")


@dataclass
class _Found(Findings):
    bad: list[str] = field(default_factory=list)  # the damaged files, the first for the command
    files: int = 0  # shards checked

    def damaged(self, signal: str, path: str, text: str) -> None:
        self.found(signal, text)
        self.bad.append(path)


def probe(ctx: ProbeContext) -> ProbeResult:
    listing = ctx.listing
    found = _Found()
    others = _framework_files(ctx, found)
    if listing is None or not listing.exists or listing.error:
        if others:  # no DeepSpeed tag to check, but a framework's files: those alone
            return _result(found, others, [])
        return outcome(NAME, signals=[], checked=[], complete=False, found="", clear="",
                       unknown="no shard could be listed to check", evidence=[], command="")
    shards = listing.shards
    # --deep reads every byte: a meter of the bytes read (triage/progress/)
    with progress.meter(f"integrity: CRC-32 of {len(shards)} shard(s)", _total(listing), show=ctx.deep) as shown:
        for number, shard in enumerate(shards, 1):
            shown.set_postfix_str(f"shard {number}/{len(shards)}", refresh=False)
            path = os.path.join(listing.path, shard.name)
            before = shown.n
            z = zipcheck.check(path)
            if ctx.deep and z.ok:  # the CRC-32s come from deep_scan's one pass over the tag (its first call reads it all)
                _deep_crc(ctx, shard.name, z)
            shown.update(max(0, z.size - (shown.n - before)))
            _check_shard(ctx, shard.name, z, found)
    if not found.signals:
        found.context.append(f"{found.files - others} of {len(shards)} shard(s) checked: zip structure whole"
                             + (", every record's CRC-32 verified" if ctx.deep else " (--deep also checks every CRC-32)")
                             + ", pickles readable with DeepSpeed's globals only")
    return _result(found, others, shards, ctx)


def _result(found: _Found, others: int, shards, ctx: ProbeContext | None = None) -> ProbeResult:
    if others and not any(found.bad):
        found.context.append(f"{others} file(s) of the framework beside it whole (torch zip structure, safetensors "
                             "header against the file size)")
    first = found.bad[0] if found.bad else None
    target = shlex.quote(first) if first else ctx.q(ctx.ckpt.tag, shards[0].name) if shards and ctx else ""
    command = (f"python3 -m zipfile -t {target}" if not (first or "").endswith(".safetensors")
               else f"head -c 8 {target} | od -A d -t u8") if target else ""
    return outcome(NAME, signals=found.signals, checked=list(SIGNALS) if found.complete else [],
                   complete=found.complete, found="a shard or a framework file is damaged or unsafe",
                   clear="every shard is a whole torch.save archive", unknown="not every shard could be checked",
                   evidence=found.evidence, context=found.context, command=command)


def _framework_files(ctx: ProbeContext, found: _Found) -> int:
    """The framework's files beside the checkpoint (probe/framework_files.py): damaged ones are found
    like a damaged shard. Returns how many were checked."""
    from triage.probe import framework_files

    base = framework_files.base(ctx.ckpt.given)
    paths = framework_files.find(base)
    for path in paths:
        wrong = framework_files.problem(path, base)
        found.files += 1
        if wrong:
            signal, detail = wrong
            found.damaged(signal, path, f"{os.path.relpath(path, base)}: {signal}: {detail} (a file the "
                                        "framework saved beside DeepSpeed's shards and reads on resume)")
    return len(paths)


def _total(listing) -> int | None:
    total = 0
    for shard in listing.shards:
        try:
            total += os.lstat(os.path.join(listing.path, shard.name)).st_size
        except OSError:
            pass
    return total or None


def _check_shard(ctx: ProbeContext, name: str, z: zipcheck.ZipCheck, found: _Found) -> None:
    path = z.path
    if z.unreadable:
        found.unknown(f"{name}: not checked, cannot open it ({z.unreadable})")
        return
    if z.legacy:
        found.unknown(f"{name}: {z.detail}; not checked")
        return
    found.files += 1
    if z.problem:
        found.damaged(z.problem, path, f"{name}: {z.problem}: {z.detail}")
        return
    meta = ctx.meta(name)
    if meta.over_cap:
        found.damaged("suspicious_pickle", path, f"{name}: its pickle goes over the safe reader's cap "
                      f"({meta.over_cap}), which no DeepSpeed checkpoint's metadata comes near: built to exhaust "
                      "memory or time. Not read further; do not load this file")
        return
    if meta.error:
        found.damaged("bad_pickle", path, f"{name}: its pickle (data.pkl) cannot be read: {meta.error}")
        return
    if meta.suspicious:
        found.damaged("suspicious_pickle", path, f"{name}: its pickle names {', '.join(meta.suspicious[:5])}, which "
                      "no DeepSpeed checkpoint needs: torch.load(weights_only=False) would run it. Not executed "
                      "here; do not load this file")
    short = _storage_problems(meta, z.records)
    if short:
        found.damaged("storage_missing", path, f"{name}: {short}")


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
