"""A tag against its manifest: missing files, short or long ones (partial copies), changed bytes
(bit rot, or a file rewritten after the save), files the manifest does not list."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field

from triage import progress
from triage.errors import BadInput
from triage.manifest import MANIFEST_NAME, SCHEMA_VERSION
from triage.manifest.build import tag_files
from triage.manifest.hashing import sha256_file
from triage.probe import confine

MAX_MANIFEST_BYTES = 64 * 1024 * 1024


@dataclass
class ManifestCheck:
    path: str
    hashed: bool  # False: sizes only (--sizes-only)
    problems: list[str] = field(default_factory=list)
    files: int = 0
    bytes: int = 0
    seconds: float = 0.0
    tag: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def mb_per_s(self) -> float | None:
        return round(self.bytes / 1e6 / self.seconds, 1) if self.hashed and self.seconds > 0 else None

    def to_json(self) -> dict:
        return {"path": self.path, "ok": self.ok, "mode": "sha256" if self.hashed else "sizes",
                "files": self.files, "bytes": self.bytes, "seconds": round(self.seconds, 3),
                "mb_per_s": self.mb_per_s, "tag": self.tag, "problems": list(self.problems)}


def read(path: str, root: str | None = None) -> dict:
    """The manifest at `path` (inside `root` when given: the tag's own manifest may not lead out of it)."""
    try:
        with confine.open_regular(path, root) as f:
            data = f.read(MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        raise BadInput(f"manifest {path}: {exc.strerror or exc}") from None
    try:
        manifest = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInput(f"manifest {path}: not JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("kind") != "ds-triage-manifest" \
            or not isinstance(manifest.get("files"), list):
        raise BadInput(f"manifest {path}: not a ds-triage manifest (no kind: ds-triage-manifest and files list)")
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise BadInput(f"manifest {path}: schema_version {manifest.get('schema_version')!r}, this ds-triage reads "
                       f"{SCHEMA_VERSION}")
    return manifest


def check(tag_dir: str, path: str, hashed: bool = True) -> ManifestCheck:
    own = os.path.abspath(path) == os.path.abspath(os.path.join(tag_dir, MANIFEST_NAME))
    manifest = read(path, root=tag_dir if own else None)
    result = ManifestCheck(path=path, hashed=hashed, tag=manifest.get("tag"))
    listed = {}
    for entry in manifest["files"]:
        if not (isinstance(entry, dict) and isinstance(entry.get("path"), str) and isinstance(entry.get("size"), int)):
            raise BadInput(f"manifest {path}: a files entry without path and size: {str(entry)[:120]}")
        listed[entry["path"]] = entry
    start = time.monotonic()
    total = sum(max(0, e["size"]) for e in listed.values()) or None
    with progress.meter(f"sha256 of {os.path.basename(os.path.normpath(tag_dir))}", total, show=hashed) as shown:
        for number, (rel, entry) in enumerate(listed.items(), 1):
            shown.set_postfix_str(f"file {number}/{len(listed)}", refresh=False)
            _check_entry(tag_dir, rel, entry, result, shown.update)
    result.seconds = time.monotonic() - start
    extra = [rel for rel in tag_files(tag_dir) if rel not in listed]
    if extra:
        result.problems.append(f"{len(extra)} file(s) not in the manifest (added after the save?): "
                               + ", ".join(extra[:5]))
    return result


def _check_entry(tag_dir: str, rel: str, entry: dict, result: ManifestCheck, on_read) -> None:
    full = os.path.join(tag_dir, *rel.split("/"))
    refused = _refused(tag_dir, full)
    if refused:  # never hashed, so no digest of an outside file is ever printed
        result.problems.append(f"{confine.shown(rel)}: {refused}")
        return
    if not os.path.isfile(full):
        result.problems.append(f"{rel}: missing (the manifest lists {entry['size']} bytes): a partial copy?")
        return
    try:
        size = os.stat(full).st_size
    except OSError as exc:
        result.problems.append(f"{confine.shown(rel)}: cannot stat it ({exc.strerror or exc})")
        return
    result.files += 1
    if size != entry["size"]:
        result.problems.append(f"{rel}: {size} bytes, the manifest says {entry['size']}"
                               + (": cut short (a partial copy or an interrupted write)" if size < entry["size"]
                                  else ": longer than saved"))
        return
    if not result.hashed:
        result.bytes += size
        return
    try:
        digest, read_bytes = sha256_file(full, root=tag_dir, on_read=on_read)
    except OSError as exc:  # confine.Refused (changed since the check above), or a read error
        result.problems.append(f"{confine.shown(rel)}: {exc.strerror or exc}")
        return
    result.bytes += read_bytes
    if digest != entry.get("sha256"):
        result.problems.append(f"{rel}: sha256 {digest[:16]}... differs from the manifest's "
                               f"{str(entry.get('sha256'))[:16]}...: its bytes changed since the save "
                               "(bit rot, or a file rewritten)")


def _refused(tag_dir: str, path: str) -> str | None:
    """Why a listed file is not read: it leads outside the tag dir, is a symlink loop, no regular file, or
    a hard link with a name outside the tag dir."""
    if not confine.is_inside(tag_dir, path):
        return "leads outside the tag dir (`..`, an absolute path or a symlink): not read"
    if os.path.isdir(path):
        return "a directory, not a regular file: not read"
    return confine.refusal(tag_dir, path)
