"""Run `python -m triage ...` with its stderr on a real pseudo-terminal (or piped), stdout piped,
and read both as they come: what a person at a terminal sees, and when."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass, field

from tests.conftest import ROOT


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    # (seconds since start, stream name, text) of each piece as it arrived, and whether the
    # process was still running when it was read
    pieces: list[tuple[float, str, str, bool]] = field(default_factory=list)

    def first(self, stream: str, text: str) -> tuple[float, bool] | None:
        """When `text` had arrived on `stream` (the piece that completed it), and whether the process
        was running then."""
        seen = ""
        for at, name, piece, running in self.pieces:
            if name == stream:
                seen += piece
                if text in seen:
                    return at, running
        return None


def run(*args, terminal: bool = True, env: dict | None = None, timeout: float = 600, cwd=ROOT) -> Run:
    full_env = dict(os.environ, NO_COLOR="1")
    full_env.update(env or {})
    if terminal:
        controller, err = os.openpty()
        fcntl.ioctl(err, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    else:
        controller, err = os.pipe()
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "triage", *map(str, args)], stdout=subprocess.PIPE, stderr=err,
                            stdin=subprocess.DEVNULL, cwd=cwd, env=full_env)
    os.close(err)
    pieces: list[tuple[float, str, str, bool]] = []
    streams = {proc.stdout.fileno(): "stdout", controller: "stderr"}
    try:
        while streams and time.monotonic() - start < timeout:
            ready, _, _ = select.select(list(streams), [], [], 1.0)
            for fd in ready:
                try:
                    data = os.read(fd, 1 << 16)
                except OSError:  # a pseudo-terminal whose other end closed: EIO
                    data = b""
                if not data:
                    del streams[fd]
                    continue
                pieces.append((time.monotonic() - start, streams[fd], data.decode("utf-8", "replace"),
                               proc.poll() is None))
        code = proc.wait(timeout=max(1.0, timeout - (time.monotonic() - start)))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(controller)
        proc.stdout.close()
    text = {name: "".join(p for _, n, p, _ in pieces if n == name) for name in ("stdout", "stderr")}
    return Run(code, text["stdout"], text["stderr"].replace("\r\n", "\n"), pieces)
