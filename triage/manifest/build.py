"""Build and write a tag's manifest: each file's size and sha256, the layout, the versions.

Hashing streams each file in 8 MiB chunks; the time taken is kept so the command can show the
throughput (a 100 GB checkpoint on a disk reading 1 GB/s takes about 100 s to hash).
"""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import time

from triage import __version__, progress
from triage.errors import BadInput
from triage.manifest import MANIFEST_NAME, SCHEMA_VERSION
from triage.manifest.hashing import sha256_file
from triage.probe import confine
from triage.probe.context import ProbeContext
from triage.repair import files


def tag_files(tag_dir: str) -> list[str]:
    """Every file under the tag dir (universal checkpoints nest zero/<param>/), as sorted relative
    paths with '/', the manifest itself excluded."""
    out = []
    for dirpath, dirnames, names in os.walk(tag_dir):
        dirnames.sort()
        for name in names:
            rel = os.path.relpath(os.path.join(dirpath, name), tag_dir).replace(os.sep, "/")
            if rel != MANIFEST_NAME:
                out.append(rel)
    return sorted(out)


def installed(package: str) -> str | None:
    try:
        return md.version(package)
    except md.PackageNotFoundError:
        return None


def layout_json(ctx: ProbeContext) -> dict | None:
    layout = ctx.layout()
    if layout is None:
        return None
    return {"description": layout.describe(), "stage": layout.stage, "dp": layout.dp, "mp": layout.mp,
            "tp": layout.tp, "pp": layout.pp, "bf16": layout.bf16, "universal": layout.names.universal}


def saved_version(ctx: ProbeContext) -> str | None:
    listing = ctx.listing
    shards = listing.of("model", "zero3_model") if listing else []
    version = ctx.meta(shards[0].name).ds_version if shards else None
    return version if isinstance(version, str) else None


def build(tag_dir: str, fsync: bool = False) -> dict:
    """The manifest of `tag_dir` (fsync=True also flushes every file to disk while reading it)."""
    ctx = ProbeContext.for_path(tag_dir)
    entries, total = [], 0
    start = time.monotonic()
    names = tag_files(tag_dir)
    sizes = [_size(tag_dir, rel) for rel in names]
    with progress.meter(f"hashing {os.path.basename(os.path.normpath(tag_dir))}", sum(sizes)) as shown:
        for number, (rel, size) in enumerate(zip(names, sizes), 1):
            shown.set_postfix_str(f"file {number}/{len(names)}", refresh=False)
            path = os.path.join(tag_dir, rel)
            try:
                digest, read = sha256_file(path, fsync=fsync, root=tag_dir, on_read=shown.update)
            except OSError as exc:  # confine.Refused (swapped since the stat), or a read error
                raise _unhashable(tag_dir, rel, exc.strerror or str(exc)) from None
            if read != size:
                raise OSError(f"{path} changed while it was hashed ({size} bytes, then {read}): is a save still "
                              "running?")
            entries.append({"path": rel, "size": size, "sha256": digest})
            total += size
    seconds = time.monotonic() - start
    return {
        "schema_version": SCHEMA_VERSION, "kind": "ds-triage-manifest",
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "tag": os.path.basename(os.path.normpath(tag_dir)),
        "layout": layout_json(ctx),
        "versions": {"ds_version_saved": saved_version(ctx), "deepspeed": installed("deepspeed"),
                     "torch": installed("torch"), "ds_triage": __version__},
        "files": entries, "total_bytes": total,
        "hashing": {"algorithm": "sha256", "seconds": round(seconds, 3),
                    "mb_per_s": round(total / 1e6 / seconds, 1) if seconds > 0 else None},
    }


def _size(tag_dir: str, rel: str) -> int:
    """The size of a file to hash; BadInput for one that leads out, loops, is no regular file or is a hard
    link out (confine.refusal), or cannot be stat'ed."""
    path = os.path.join(tag_dir, rel)
    why = confine.refusal(tag_dir, path)
    if why:
        raise _unhashable(tag_dir, rel, why)
    try:
        return os.stat(path).st_size
    except OSError as exc:
        raise _unhashable(tag_dir, rel, f"cannot stat it ({exc.strerror or exc})") from None


def _unhashable(tag_dir: str, rel: str, why: str) -> BadInput:
    return BadInput(f"{tag_dir}/{confine.shown(rel)}: {why}; a manifest hashes only regular files inside the tag")


def manifest_path(tag_dir: str) -> str:
    return os.path.join(tag_dir, MANIFEST_NAME)


def write(tag_dir: str, manifest: dict) -> str:
    """Write the manifest into the tag dir; a new file only (FileExistsError if there is one)."""
    path = manifest_path(tag_dir)
    if os.path.lexists(path):
        raise FileExistsError(path)
    files.atomic_write(path, json.dumps(manifest, indent=2) + "\n")
    return path
