"""A file's bytes on an executor, in blocks of whole lines.

Spark lists the files (globs, directories, any Hadoop filesystem). A local file (`file:`) is
read here, in blocks, never whole in memory; a file elsewhere (HDFS, S3) comes with its
content, which Spark read on the executor, and is cut into the same blocks.
"""

from __future__ import annotations

from typing import Iterator
from urllib.parse import unquote, urlparse

BLOCK = 4 << 20  # bytes a block holds (then up to the end of its last line), as stream reads


def local_path(url: str) -> str | None:
    """The local path of a `file:` URL as Spark names it (file:/logs/a%20b.log), else None."""
    if not url.startswith("file:"):
        return None
    return unquote(urlparse(url).path)


def chunks(url: str, content: bytes | None, size: int = BLOCK) -> Iterator[bytes]:
    """The file's bytes in chunks of `size` (the first one is the file's head)."""
    if content is not None:
        return (bytes(content[start:start + size]) for start in range(0, len(content), size))
    return _read(local_path(url), size)


def blocks(url: str, content: bytes | None, size: int = BLOCK) -> Iterator[bytes]:
    """The file's bytes in blocks that end at a newline (the last one may not). A line longer
    than 4 blocks is cut there (stream cuts one at 4 MiB: scan.py, max_raw_line)."""
    rest = b""
    for chunk in chunks(url, content, size):
        data = rest + chunk if rest else chunk
        end = data.rfind(b"\n") + 1
        if end == 0 and len(data) <= 4 * size:
            rest = data
            continue
        end = end or len(data)
        rest = data[end:]
        yield data[:end]
    if rest:
        yield rest


def _read(path: str, size: int) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while True:
            chunk = f.read(size)
            if not chunk:
                return
            yield chunk
