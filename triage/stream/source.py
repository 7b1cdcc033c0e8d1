"""Read a file or a live pipe in big chunks, waking up for idle timeouts while it is quiet."""

from __future__ import annotations

import os
import select
import stat
import time

from triage.errors import BadInput
from triage.logs.inputs import open_file
from triage.stream.pipeline import StreamTriage

CHUNK = 4 << 20  # bytes per read: large enough that per-call costs vanish


def open_input(path: str) -> int:
    """A file descriptor for `path` ('-' is stdin), or BadInput saying why not."""
    return 0 if path == "-" else open_file(path)


def pump(fd: int, triage: StreamTriage, on_read=None, jobs: int = 1) -> None:
    """Feed everything from `fd` until end of input. While the input is quiet, select()
    returns at the next incident's idle deadline so it is emitted on time. on_read(n): called
    after each chunk of n bytes is fed (a progress meter). `jobs`: processes a large regular
    file may be read by (split.py), with the same answer."""
    st = os.fstat(fd)
    if jobs > 1 and stat.S_ISREG(st.st_mode) and hasattr(os, "fork"):
        from triage.stream.split import parts, pump_parts

        starts = parts(fd, st.st_size, jobs)
        if len(starts) > 1:
            pump_parts(fd, triage, starts, st.st_size, on_read)
            return
    waits = _can_select(fd)
    while True:
        if waits:
            deadline = triage.assembler.next_deadline()
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                triage.tick(time.monotonic())
                continue
        try:
            data = os.read(fd, CHUNK)
        except OSError as exc:
            raise BadInput(f"cannot read the input: {exc.strerror or exc}") from None
        if not data:
            break
        now = time.monotonic()
        triage.feed(data, now)
        triage.tick(now)
        if on_read is not None:
            on_read(len(data))
    triage.finish(time.monotonic())


def _can_select(fd: int) -> bool:
    try:
        select.select([fd], [], [], 0)
        return True
    except (OSError, ValueError):  # not selectable here (e.g. a Windows console): plain blocking reads
        return False
