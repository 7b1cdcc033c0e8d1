"""Writing results safely: atomic replace of a small file, a dated backup, publishing a staged dir.

Each write goes to a temporary name first and is fsynced, then renamed over (os.replace is
atomic on POSIX), so a crash leaves either the old file or the new one, never half of one. The
temporary is made O_EXCL in a dir this process creates, and nothing is written or copied through a
symlink the checkpoint planted (probe/confine.py).
"""

from __future__ import annotations

import os
import shutil
import time

from triage.probe import confine


fsync_dir = confine.fsync_dir  # one implementation, beside the writes it makes durable


def atomic_write(path: str, text: str) -> None:
    confine.atomic_write(path, text)


def backup_path(path: str) -> str:
    """`<path>.bak-YYYYmmdd-HHMMSS`, with a counter when that exists already."""
    base = f"{path}.bak-{time.strftime('%Y%m%d-%H%M%S')}"
    candidate, n = base, 1
    while os.path.lexists(candidate):
        candidate, n = f"{base}.{n}", n + 1
    return candidate


def backup(path: str, target: str) -> None:
    """Copy `path` to the new file `target`, fsynced, before `path` is replaced (a symlink as a symlink)."""
    confine.backup(path, target)


def fresh_staging(staging: str) -> list[str]:
    """An empty staging dir; one left by an interrupted run of ds-triage is removed first."""
    notes = []
    if os.path.lexists(staging):
        shutil.rmtree(staging) if os.path.isdir(staging) and not os.path.islink(staging) else os.remove(staging)
        notes.append(f"removed {staging}, left by an interrupted repair")
    os.makedirs(staging)
    return notes


def publish(staging: str, out: str) -> None:
    """Rename the finished staging dir (or file) to `out`, which must not exist."""
    if os.path.lexists(out):
        raise FileExistsError(f"{out} appeared while the repair ran; the result is left in {staging}")
    os.rename(staging, out)
    fsync_dir(os.path.dirname(os.path.abspath(out)))
