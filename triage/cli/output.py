"""Writing a command's result: the JSON object (`--json`) or the terminal text."""

from __future__ import annotations

import json
import sys
from typing import Callable


def emit(as_json: bool, data: Callable[[], dict], text: Callable[[], str]) -> None:
    """Both are thunks: only the form asked for is built."""
    if as_json:
        json.dump(data(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(text())


def add_progress_options(parser) -> None:
    """`--progress` and `-q/--quiet`, for the commands that can take long (triage.progress; the
    dispatcher turns progress on or off from them)."""
    parser.add_argument("--progress", action="store_true",
                        help="show progress on stderr even when it is not a terminal (default: on a terminal only)")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress and no summary lines on stderr (errors are still printed)")
