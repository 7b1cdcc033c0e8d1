"""Checkpoints whose paths lead out of their root, or onto files that are not files (issue 16).

Each builder takes a fresh copy of a real DeepSpeed checkpoint (`Planted.root`, the --load dir)
and plants one attack against `Planted.outside`, a dir beside it that holds a secret file with
a unique MARKER and a full copy of the tag: a tool that follows the plant prints the marker, or
probes the outside copy, or writes into it. Nothing here writes outside `Planted.base`.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

MARKER = f"SECRET-{uuid.uuid4().hex}"  # must never appear in any output


@dataclass
class Planted:
    base: Path  # holds root/ and outside/
    root: Path  # the checkpoint root, with `latest`
    tag: str
    outside: Path  # not the checkpoint's: its files must be neither printed nor modified

    @property
    def tag_dir(self) -> Path:
        return self.root / self.tag

    @property
    def secret(self) -> Path:
        return self.outside / "secret.txt"

    def shards(self) -> list[Path]:
        return sorted(self.tag_dir.glob("*_states.pt"))


def prepare(baseline: Path, base: Path) -> Planted:
    """A copy of the real checkpoint `baseline` in base/root, and base/outside with the secret and a
    copy of the tag (so a probe that wanders out finds a healthy checkpoint there)."""
    root = base / "root"
    shutil.copytree(baseline, root, symlinks=True)
    tag = (root / "latest").read_text().strip()
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"root:{MARKER}:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n")  # as /etc/shadow
    shutil.copytree(root / tag, outside / tag)
    return Planted(base, root, tag, outside)


def latest_to_secret(p: Planted) -> None:
    """`latest` is a symlink to a secret file outside (as to /etc/shadow)."""
    (p.root / "latest").unlink()
    (p.root / "latest").symlink_to(p.secret)


def latest_hardlink_to_secret(p: Planted) -> None:
    """`latest` is a hard link to the secret (no symlink to refuse: its content must not be shown)."""
    (p.root / "latest").unlink()
    os.link(p.secret, p.root / "latest")


def latest_hardlink_to_token(p: Planted) -> None:
    """`latest` is a hard link to a one-line secret that reads like a tag name (an API token): no
    length or character rule can tell it from a tag; that it names no tag here, with other links, can."""
    token = p.outside / "token"
    token.write_text(f"{MARKER}\n")
    (p.root / "latest").unlink()
    os.link(token, p.root / "latest")


def latest_dotdot(p: Planted) -> None:
    """`latest` names a tag through `..` (as `../../../../etc`): the outside copy of the tag."""
    (p.root / "latest").write_text(os.path.relpath(p.outside / p.tag, p.root))


def tag_symlink_out(p: Planted) -> None:
    """The tag dir `latest` names is a symlink to the outside copy of it."""
    shutil.rmtree(p.tag_dir)
    p.tag_dir.symlink_to(p.outside / p.tag)


def shard_to_secret(p: Planted) -> None:
    """Every shard is a symlink to the secret file outside."""
    for shard in p.shards():
        shard.unlink()
        shard.symlink_to(p.secret)


def shard_fifo(p: Planted) -> None:
    """The optimizer shard is a FIFO (an open() for reading blocks until a writer comes)."""
    shard = next(s for s in p.shards() if "optim" in s.name)
    shard.unlink()
    os.mkfifo(shard)


def latest_fifo(p: Planted) -> None:
    (p.root / "latest").unlink()
    os.mkfifo(p.root / "latest")


def shard_dev_zero(p: Planted) -> None:
    """The model shard is a symlink to /dev/zero (endless bytes)."""
    shard = next(s for s in p.shards() if "model" in s.name)
    shard.unlink()
    shard.symlink_to("/dev/zero")


def manifest_dotdot(p: Planted, manifest: dict) -> None:
    """The tag's manifest (a real one, `manifest`) also lists the secret through `..`."""
    rel = os.path.relpath(p.secret, p.tag_dir)
    size = p.secret.stat().st_size
    manifest["files"].append({"path": rel, "size": size, "sha256": "0" * 64})
    (p.tag_dir / "ds-triage-manifest.json").write_text(json.dumps(manifest))


def victim(p: Planted) -> Path:
    """A file outside that planted symlinks point writes at."""
    path = p.outside / "victim.txt"
    path.write_text("untouched\n")
    return path


def temporaries_to_victim(p: Planted, pids, seconds: int = 30) -> None:
    """The names the tool's temporaries and backups used to take (`<file>.tmp-<pid>` for `pids`, and
    `latest.bak-<timestamp>` for the next `seconds`), planted as symlinks to the victim."""
    target = victim(p)
    for pid in pids:
        for path in (p.root / f"latest.tmp-{pid}", p.tag_dir / f"ds-triage-manifest.json.tmp-{pid}"):
            path.symlink_to(target)
    now = time.time()
    for s in range(seconds):
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now + s))
        (p.root / f"latest.bak-{stamp}").symlink_to(target)


def inside_alias(p: Planted) -> str:
    """A tag dir symlink to the real tag, inside the root, named by `latest`: allowed."""
    alias = "alias_of_" + p.tag
    (p.root / alias).symlink_to(p.tag)
    (p.root / "latest").write_text(alias)
    return alias
