"""Running DeepSpeed's own tools (and ds-triage's load checker) as subprocesses.

`run_live` runs one with its output merged, kept (head and tail) and shown line by line on stderr
as it comes when progress is on (triage/progress/). The child gets a session of its own; past
its time limit, on Ctrl-C or on a SIGTERM to ds-triage, the child and every process under it
(torchrun's ranks, ds_to_universal's workers) are killed.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from triage import progress
from triage.errors import TimedOut, TriageError

PYTHON = sys.executable
TAIL_LINES = 12
MAX_KEPT = 4 << 20  # characters of a tool's output kept: head and tail
GRACE = 3.0  # seconds between SIGTERM and SIGKILL


class ToolFailed(TriageError):
    """A DeepSpeed tool the repair runs exited non-zero; nothing was published."""

    exit_code = 1


def subprocess_env() -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    # On a machine without a GPU DeepSpeed must be told to use the CPU; where the user set an
    # accelerator, theirs stands.
    env.setdefault("DS_ACCELERATOR", "cpu")
    return env


def tail(text: str, lines: int = TAIL_LINES) -> list[str]:
    kept = [line for line in text.splitlines() if line.strip()]
    return kept[-lines:]


TOOL_TIMEOUT = 3600


def run_tool(argv: list[str], staging: str, timeout: float | None = None, label: str = "") -> str:
    """Run argv ("{staging}" substituted); its combined output, or ToolFailed with its last lines
    (TimedOut past `timeout` seconds, default TOOL_TIMEOUT)."""
    argv = [a.replace("{staging}", staging) for a in argv]
    limit = timeout or TOOL_TIMEOUT
    shown = " ".join(argv[:4]) + " ..."
    ran = run_live(argv, limit, label or shown)
    if ran.code is None:
        raise TimedOut(f"{shown} ran past the time limit of {limit:g} s and was stopped ({ran.killed} process(es) "
                       f"killed); nothing was written to the output. Give it longer with --timeout SECONDS")
    if ran.code != 0:
        raise ToolFailed(f"{shown} exited {ran.code}; nothing was written to the output. Its last lines:\n  "
                         + "\n  ".join(tail(ran.output)))
    return ran.output


@dataclass
class Ran:
    code: int | None  # None: stopped at the time limit
    output: str  # stdout and stderr merged (head and tail past MAX_KEPT characters)
    seconds: float
    killed: int = 0  # processes killed at the time limit


class _Kept:
    """The first and the last `limit // 2` characters of a stream of text."""

    def __init__(self, limit: int):
        self.half, self.head, self.tail, self.tail_size, self.cut = limit // 2, [], [], 0, False
        self.head_size = 0

    def add(self, text: str) -> None:
        if self.head_size < self.half:
            self.head.append(text)
            self.head_size += len(text)
            return
        self.tail.append(text)
        self.tail_size += len(text)
        while self.tail_size > self.half and len(self.tail) > 1:
            self.tail_size -= len(self.tail.pop(0))
            self.cut = True

    def text(self) -> str:
        return "".join(self.head) + ("\n" if self.cut else "") + "".join(self.tail)


def run_live(argv: list[str], timeout: float, label: str, env: dict | None = None, keep: int = MAX_KEPT) -> Ran:
    """Run argv to its end or its time limit; its merged output kept and, with progress on, shown
    line by line as it comes under a meter named `label`. Ctrl-C kills the child's tree, then propagates."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env or subprocess_env(), start_new_session=True)
    except OSError as exc:
        raise ToolFailed(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    kept, partial, killed, code = _Kept(keep), b"", 0, None
    deadline = start + timeout
    with _sigterm_unwinds(), progress.meter(label, unit="lines") as shown:
        try:
            fd = proc.stdout.fileno()
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                ready, _, _ = select.select([fd], [], [], min(remaining, 1.0))
                if not ready:
                    shown.update(0)  # the time elapsed moves on while the child is quiet
                    continue
                data = os.read(fd, 1 << 16)
                if not data:
                    break
                *lines, partial = (partial + data).split(b"\n")
                for raw in lines:
                    line = raw.decode("utf-8", "replace")
                    kept.add(line + "\n")
                    progress.tail(line)
                shown.update(len(lines))
            try:
                code = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                killed = kill_tree(proc)
        finally:
            if proc.poll() is None:  # Ctrl-C or an error here: leave no process behind
                kill_tree(proc)
            proc.stdout.close()
    if partial:
        kept.add(partial.decode("utf-8", "replace"))
    return Ran(code, kept.text(), time.monotonic() - start, killed)


@contextlib.contextmanager
def _sigterm_unwinds():
    """SIGTERM to ds-triage itself (a CI job's time limit, `kill`) unwinds like Ctrl-C, so the child,
    in a session of its own that no signal to ours reaches, is killed too (exit 143)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def kill_tree(proc: subprocess.Popen, grace: float = GRACE) -> int:
    """SIGTERM the child's process group and every process under it, SIGKILL whatever is left after
    `grace` seconds; how many processes there were."""
    victims = {proc.pid} | descendants(proc.pid)
    _signal(proc.pid, victims, signal.SIGTERM)
    end = time.monotonic() + grace
    while time.monotonic() < end and (proc.poll() is None or any(_alive(p) for p in victims - {proc.pid})):
        time.sleep(0.05)
    victims |= descendants(proc.pid)
    _signal(proc.pid, victims, signal.SIGKILL)
    proc.wait()
    return len(victims)


def _signal(group: int, pids: set[int], sig: int) -> None:
    try:
        os.killpg(group, sig)  # start_new_session: the child leads its own process group
    except (ProcessLookupError, PermissionError):
        pass
    for pid in pids:  # and any process under it that left the group
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"  # a zombie is dead, only not yet reaped
    except (OSError, IndexError):
        return False


def descendants(pid: int) -> set[int]:
    """Every process under `pid` (from /proc; empty where there is none: the process group still
    reaches them)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return set()
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found
