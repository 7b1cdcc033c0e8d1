"""Which log a command reads: the path given, else stdin when it is piped."""

from __future__ import annotations

import sys

from triage.errors import UsageError


def log_source(given: str | None, piped_example: str) -> str:
    """`given`, or '-' for a piped stdin; on a terminal with nothing given, a usage error showing
    `piped_example` (waiting for a paste nobody announced would look like a hang)."""
    if given is not None:
        return given
    if sys.stdin.isatty():
        raise UsageError(f"no log given: pass a file, or pipe it in (`{piped_example}`)")
    return "-"
