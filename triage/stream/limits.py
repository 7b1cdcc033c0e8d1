"""How much the stream assembler may hold (assemble.py says what each limit does).

Apart from assemble.py so that the command line reads the defaults for its --help without
importing the assembler, the prefilter and the rules (classify's cold start builds that parser).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    gap: int = 400
    idle: float = 10.0
    max_lines: int = 2000
    max_bytes: int = 1 << 20
    max_line: int = 64 * 1024
    max_open: int = 4096
    max_held: int = 256 << 20  # bytes of lines held by all open incidents together
    max_streams: int = 4096
