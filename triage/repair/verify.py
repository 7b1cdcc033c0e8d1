"""`ds-triage verify`: the probe layer as a gate after a save, plus the manifest check.

Healthy means: no probe confirmed a problem, every file DeepSpeed would load is verified safe by the
trust gate (triage/probe/trust.py: no suspicious or unverifiable pickle), and, when the tag has a manifest
(`<tag>/ds-triage-manifest.json`, or --manifest FILE), every file it lists is there with its size
and sha256. The structure alone cannot see a flipped byte inside tensor data (a zip's CRC only
with --deep) or a copy that stopped between two files the layout does not require; the manifest can.
With --deep the consistency probe also runs: shards exchanged between ranks or mixed from different
saves are whole files with good CRCs that DeepSpeed loads without a word, and fail verify here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from triage.errors import BadInput
from triage.manifest.build import manifest_path
from triage.manifest.check import ManifestCheck, check
from triage.probe.context import ProbeContext
from triage.probe.report import ProbeReport, probe_all
from triage.probe.target import from_args, given_releases
from triage.probe.trust import TrustReport, scan_load

SCHEMA_VERSION = 1


@dataclass
class VerifyReport:
    probe: ProbeReport
    manifest: ManifestCheck | None
    manifest_note: str
    trust: TrustReport | None = None  # the trust gate's scan: a suspicious or unverifiable file fails verify

    @property
    def problems(self) -> list[str]:
        found = [f"{r.name}: {line}" for r in self.probe.problems for line in (r.headline or [r.summary])]
        if self.manifest is not None:
            found += [f"manifest: {p}" for p in self.manifest.problems]
        if self.trust is not None:
            found += [f"trust: {f.name}: {f.verdict} ({f.detail})" for f in self.trust.untrusted]
        return found

    @property
    def healthy(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        return {"schema_version": SCHEMA_VERSION, "healthy": self.healthy,
                "checkpoint": self.probe.checkpoint_json(),
                "probes": [r.to_json() for r in self.probe.results.values()],
                "manifest": self.manifest.to_json() if self.manifest else None,
                "manifest_note": self.manifest_note, "problems": self.problems,
                "trust": self.trust.to_json() if self.trust else None}


def verify(path: str, manifest: str | None = None, deep: bool = False, hashed: bool = True,
           load_dir: str | None = None, model: str | None = None,
           releases: tuple[str | None, str | None] = (None, None)) -> VerifyReport:
    """load_dir: the dir the job will pass to load_checkpoint / --load; one level off (a tag dir, a
    Trainer output dir, the root's parent) is a problem: DeepSpeed returns (None, None) from it.
    model: the model the job builds (a --model file): names or shapes that differ are a problem, as a
    load with strict=False would take the checkpoint without a word. releases: (deepspeed, torch), the
    loading job's releases when not this host's (the version probe)."""
    if not os.path.lexists(path):
        raise BadInput(f"{path}: no such file or directory")
    if manifest is not None and not os.path.isfile(manifest):
        raise BadInput(f"--manifest {manifest}: no such file")
    target = given_releases(from_args(None, None, None, model=model, load_dir=load_dir), *releases)
    ctx = ProbeContext.for_path(path, target, deep=deep)
    report = probe_all(ctx)
    tag_dir = ctx.ckpt.tag_dir
    # the tag, and the tags `latest` and `latest_universal` name: the job's config may load either
    trusted = scan_load(ctx.ckpt.root, ctx.ckpt.tag) if ctx.ckpt.root else None
    trusted = trusted if trusted and (trusted.tags or trusted.files) else None  # nothing to walk: no claim
    default = manifest_path(tag_dir) if tag_dir else None
    chosen = manifest or (default if default and os.path.isfile(default) else None)
    if chosen is None:
        note = (f"no manifest at {default}: structure only; write one after each save (`ds-triage manifest`) so that "
                "verify also catches bit rot and partial copies" if default else "no tag, so no manifest to check")
        return VerifyReport(report, None, note, trusted)
    if tag_dir is None or not os.path.isdir(tag_dir):
        return VerifyReport(report, None, f"the tag dir does not exist, so {chosen} cannot be checked", trusted)
    result = check(tag_dir, chosen, hashed=hashed)
    return VerifyReport(report, result, "sha256 of every file" if hashed else "sizes only (--sizes-only)", trusted)
