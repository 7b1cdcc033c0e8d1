"""A file's bytes on an executor, in blocks of whole lines.

Spark lists the files (globs, directories, any Hadoop filesystem). A local file (`file:`) is
read here, in blocks, never whole in memory; a file elsewhere (HDFS, S3) comes with its
content, which Spark read on the executor, and is cut into the same blocks.
"""

from __future__ import annotations

import os
from typing import Iterator
from urllib.parse import unquote, urlparse

BLOCK = 4 << 20  # bytes a block holds (then up to the end of its last line), as stream reads


def file_url(uri: str) -> str:
    """A file as Spark's binaryFile source names it (file:/logs/a b.log), from its URI
    (file:///logs/a%20b.log, as Spark's listing gives it)."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return uri
    return "file:" + unquote(parsed.path)


def local_path(url: str) -> str:
    """The local path of a file named `file:/logs/a b.log`."""
    return url.removeprefix("file:")


def by_size(urls: list[str], cores: int, most: int = 64 << 20) -> list[list[str]]:
    """Local files in input order, cut into groups of about equal bytes: a few tasks a core
    while there is enough to read, none over `most` bytes (unless one file is)."""
    sizes = []
    for url in urls:
        try:
            sizes.append(os.path.getsize(local_path(url)))
        except OSError:  # not on the driver (a cluster reads its own local disks): count it small
            sizes.append(0)
    target = min(most, max(1 << 20, sum(sizes) // max(1, 3 * cores)))
    groups: list[list[str]] = []
    held = target
    for url, size in zip(urls, sizes):
        if held + size > target and (not groups or groups[-1]):
            groups.append([])
            held = 0
        groups[-1].append(url)
        held += size + (64 << 10)  # opening a file costs something too
    return groups


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
