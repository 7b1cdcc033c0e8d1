"""An strace for this process: every path opened (open(), os.open(), io.open) or listed while a
block runs, from Python's audit hooks (PEP 578), resolved when the event fires, with its inode.

    with audit.recording() as seen:
        main(["probe", root])
    outside = [e for e in seen if audit.under(e.path, str(elsewhere))]

A hook cannot be removed, so one is installed for the process and records only inside the block.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass

EVENTS = ("open", "os.listdir", "os.scandir")
MADE = ("tempfile.mkdtemp", "tempfile.mkstemp")
SPAWNS = ("subprocess.Popen", "os.posix_spawn", "os.fork", "os.exec")  # whose reads no hook here sees


@dataclass(frozen=True)
class Event:
    event: str  # open, os.listdir, os.scandir; tempfile.mkdtemp / mkstemp (a path the code created); a spawn
    path: str  # resolved (realpath) when the event fired; a spawn's executable as given
    inode: tuple[int, int] | None  # (st_dev, st_ino), None when it could not be stat'ed


_active: list[list[Event]] = []


def _hook(event: str, args: tuple) -> None:
    if not _active or (event not in EVENTS and event not in MADE and event not in SPAWNS):
        return
    if event in SPAWNS:
        _active[-1].append(Event(event, str(args[0]) if args else "", None))
        return
    if not args or not isinstance(args[0], (str, bytes, os.PathLike)):
        return  # an fd (os.scandir(fd), open(fd)): its path was recorded when it was opened
    path = os.fsdecode(args[0])
    try:
        st = os.stat(path)  # a stat never blocks, and is no audited event
        inode = (st.st_dev, st.st_ino)
    except OSError:
        inode = None
    _active[-1].append(Event(event, os.path.realpath(path), inode))


sys.addaudithook(_hook)


@contextlib.contextmanager
def recording():
    """The events of the block, in order."""
    seen: list[Event] = []
    _active.append(seen)
    try:
        yield seen
    finally:
        _active.remove(seen)


def under(path: str, top: str) -> bool:
    top = os.path.realpath(top)
    return path == top or path.startswith(top.rstrip(os.sep) + os.sep)


def inodes(top) -> set[tuple[int, int]]:
    """The (st_dev, st_ino) of every file under `top`: what a hard link to one of them shares."""
    out = set()
    for dirpath, _, names in os.walk(top):
        for name in names:
            st = os.stat(os.path.join(dirpath, name))
            out.add((st.st_dev, st.st_ino))
    return out
