"""sha256 of a file, streamed in chunks (constant memory whatever the shard's size)."""

from __future__ import annotations

import hashlib
import os

CHUNK = 8 << 20


def sha256_file(path: str, fsync: bool = False) -> tuple[str, int]:
    """(hex digest, bytes read). fsync=True also flushes the file to disk (the guarded save)."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while True:
            block = f.read(CHUNK)
            if not block:
                break
            digest.update(block)
            size += len(block)
        if fsync:
            os.fsync(f.fileno())
    return digest.hexdigest(), size
