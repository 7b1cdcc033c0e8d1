"""Running DeepSpeed's own tools (and ds-triage's load checker) as subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from triage.errors import TriageError

PYTHON = sys.executable
TAIL_LINES = 12


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


def run_tool(argv: list[str], staging: str, timeout: int = 3600) -> str:
    """Run argv ("{staging}" substituted); its combined output, or ToolFailed with its last lines."""
    argv = [a.replace("{staging}", staging) for a in argv]
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as log:
        try:
            code = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  env=subprocess_env(), timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
        except OSError as exc:
            raise ToolFailed(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
        log.seek(0)
        text = log.read()
    if code != 0:
        shown = " ".join(argv[:4]) + " ..."
        raise ToolFailed(f"{shown} exited {code}; nothing was written to the output. Its last lines:\n  "
                         + "\n  ".join(tail(text)))
    return text
