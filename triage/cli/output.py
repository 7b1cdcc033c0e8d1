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
