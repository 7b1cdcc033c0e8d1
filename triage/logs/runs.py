"""Where the run that failed starts, in a log that can hold several runs.

A job script that trains, saves and then runs a second step writes both runs to one log; a
stream holds restarts. Settings printed by an earlier run (its ZeRO stage, its world size) are
not the failing run's. A run starts where DeepSpeed sets up its backend or engine, or where
torchrun or the deepspeed launcher starts; the failing run is the last one started before the
first traceback. `ds-triage stream` forgets a stream's run_line context at the same lines.
"""

from __future__ import annotations

import re

# Printed once per launch, before any line a rule reads: deepspeed/comm/comm.py init_distributed,
# deepspeed/__init__.py initialize, torchrun (more than one process), the deepspeed launcher.
RUN_START_TEXTS = ("Initializing TorchBackend in DeepSpeed", "DeepSpeed info: version=",
                   "Setting OMP_NUM_THREADS environment variable", "WORLD INFO DICT:")
RUN_START = re.compile("|".join(map(re.escape, RUN_START_TEXTS)))
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)")


def failing_run_start(text: str, end: int | None = None) -> int:
    """Offset of the line where the failing run starts (0 when no start shows before `end`,
    by default the first traceback, else the end of the text)."""
    if end is None:
        first = _TRACEBACK.search(text)
        end = first.start() if first else len(text)
    # The last start text before `end`: a reverse substring search per text, not RUN_START tried
    # at every offset. Where two overlap ("... in DeepSpeed info: version="), both are on one line.
    last = max(text.rfind(start, 0, end) for start in RUN_START_TEXTS)
    return text.rfind("\n", 0, last) + 1 if last >= 0 else 0
