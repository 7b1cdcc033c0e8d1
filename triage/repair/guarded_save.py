"""A DeepSpeed save that never leaves `latest` naming a broken tag.

    from triage.repair.guarded_save import save_checkpoint_safely

    save_checkpoint_safely(engine, save_dir)          # instead of engine.save_checkpoint(save_dir)

Every rank calls it, as with engine.save_checkpoint. It

1. saves into `<save_dir>/.ds-triage-staging/<tag>` with save_latest=False (DeepSpeed then does not
   write `latest`; the staging dir holds no shards at its top, so neither DeepSpeed nor ds-triage
   takes it for a tag);
2. on rank 0, after every rank has written (save_checkpoint ends in a barrier): runs the probe
   layer on the staged tag (completeness, permission, integrity) and the trust gate (every file the
   next load opens must be verified safe: triage/probe/trust.py), writes its manifest
   (`<tag>/ds-triage-manifest.json`, every file hashed and fsynced), renames the tag dir into
   `save_dir` (one rename on the same filesystem), and only then replaces `latest` atomically
   (temporary file, fsync, os.replace);
3. tells every rank the outcome: GuardedSaveError on all of them if the new tag failed, with
   `latest` still on the previous tag and the staged files kept for a look.

A crash (SIGKILL, preemption, OOM kill) at any point leaves `latest` as it was: on the previous
good tag, or on the new one once it is whole. Needs a filesystem all ranks share (as DeepSpeed's
rank-0 `latest` does); DeepSpeed's node-local storage and decoupled (async) checkpoint engines are
not supported. Saving a tag that exists replaces it (the old dir is moved into the staging dir,
then deleted).
"""

from __future__ import annotations

import os
import shutil
import time

from triage.repair import files

STAGING = ".ds-triage-staging"
GATE = ("completeness", "permission", "integrity")


class GuardedSaveError(RuntimeError):
    """The new tag failed verification (or could not be published); `latest` was not moved."""


def save_checkpoint_safely(engine, save_dir: str, tag=None, client_state: dict | None = None, *,
                           write_manifest: bool = True, exclude_frozen_parameters: bool = False) -> str:
    """Save, verify, write the manifest, publish the tag, then move `latest`; returns the tag."""
    import torch.distributed as dist

    if getattr(engine.checkpoint_engine, "is_decoupled", lambda: False)():
        raise GuardedSaveError("a decoupled (async) checkpoint engine commits later than save_checkpoint returns; "
                               "the guarded save needs the synchronous one")
    tag = str(tag) if tag is not None else f"global_step{engine.global_steps}"
    staging = os.path.join(save_dir, STAGING)
    rank0 = not dist.is_initialized() or dist.get_rank() == 0
    if rank0:
        stale = os.path.join(staging, tag)
        if os.path.isdir(stale):
            shutil.rmtree(stale)  # our own leftover from a save of this tag that died
        os.makedirs(staging, exist_ok=True)
    if dist.is_initialized():
        dist.barrier()
    engine.save_checkpoint(staging, tag=tag, client_state=client_state or {}, save_latest=False,
                           exclude_frozen_parameters=exclude_frozen_parameters)
    error = None
    if rank0:
        try:
            publish(save_dir, tag, write_manifest)
        except Exception as exc:  # noqa: BLE001 - every rank must learn of it, then raise
            error = f"{type(exc).__name__}: {exc}" if not isinstance(exc, GuardedSaveError) else str(exc)
    if dist.is_initialized():
        box = [error]
        dist.broadcast_object_list(box, src=0)
        error = box[0]
    if error:
        raise GuardedSaveError(error)
    return tag


def publish(save_dir: str, tag: str, write_manifest: bool = True) -> None:
    """Rank 0, after every rank saved into the staging dir: verify, manifest, rename, `latest`."""
    from triage.manifest import build
    from triage.probe import checks, trust
    from triage.probe.context import ProbeContext
    from triage.probe.result import CONFIRMED

    staged = os.path.join(save_dir, STAGING, tag)
    results = checks.run(ProbeContext.for_path(staged), GATE)
    broken = [f"{r.name}: {(r.headline or [r.summary])[0]}" for r in results.values() if r.status == CONFIRMED]
    untrusted = trust.scan(staged).untrusted  # what the next load would open must be verified safe too
    broken += [f"trust: {f.name}: {f.verdict} ({f.detail})" for f in untrusted]
    if broken:
        raise GuardedSaveError(f"the new tag {tag} failed verification ({'; '.join(broken[:3])}); `latest` is "
                               f"unchanged and the files are kept in {staged}")
    if write_manifest:
        build.write(staged, build.build(staged, fsync=True))
    else:
        for rel in build.tag_files(staged):
            with open(os.path.join(staged, rel), "rb") as f:
                os.fsync(f.fileno())
    files.fsync_dir(staged)
    final = os.path.join(save_dir, tag)
    replaced = None
    if os.path.lexists(final):
        replaced = os.path.join(save_dir, STAGING, f"{tag}.replaced-{time.strftime('%Y%m%d-%H%M%S')}")
        os.rename(final, replaced)
    os.rename(staged, final)
    files.fsync_dir(save_dir)
    files.atomic_write(os.path.join(save_dir, "latest"), tag)
    if replaced:
        shutil.rmtree(replaced, ignore_errors=True)
