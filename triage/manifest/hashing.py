"""sha256 of a file, streamed in chunks (constant memory whatever the shard's size)."""

from __future__ import annotations

import hashlib
import os

from triage.probe.confine import open_regular

CHUNK = 8 << 20


def sha256_file(path: str, fsync: bool = False, root: str | None = None, on_read=None) -> tuple[str, int]:
    """(hex digest, bytes read). fsync=True also flushes the file to disk (the guarded save). A regular
    file only (inside `root` when given): confine.Refused for a FIFO, a device or a way out of `root`.
    on_read(n): called with the size of each chunk read, for a progress meter."""
    digest = hashlib.sha256()
    size = 0
    with open_regular(path, root) as f:
        while True:
            block = f.read(CHUNK)
            if not block:
                break
            digest.update(block)
            size += len(block)
            if on_read is not None:
                on_read(len(block))
        if fsync:
            os.fsync(f.fileno())
    return digest.hexdigest(), size
