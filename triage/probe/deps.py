"""The optional packages a command needs, checked before it starts (never imported here).

`probe --reproduce` and the repairs that convert or load (`repair fp32|universal|strip-optimizer
--apply`, and any repair's verifying load) run torch and DeepSpeed in subprocesses of this
interpreter. Without them such a command cannot be used (exit 7, MissingDependency) rather than
report the subprocess's ImportError as a finding about the checkpoint.
"""

from __future__ import annotations

import importlib.util
import sys

from triage.errors import MissingDependency

LOAD = ("torch", "deepspeed")  # what a real DeepSpeed load imports
INSTALL = "pip install 'ds-triage[probe]', or torch and deepspeed into this environment"


def missing(packages) -> list[str]:
    """The packages of `packages` this interpreter cannot find (found by the import system, not imported)."""
    out = []
    for name in packages:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a finder refused it, or a broken half-import left behind
            found = False
        if not found:
            out.append(name)
    return out


def require(packages, what: str) -> None:
    """MissingDependency (exit 7) naming what `what` needs, unless every package is there."""
    gone = missing(packages)
    if gone:
        raise MissingDependency(f"{what} cannot be used here: it needs {' and '.join(packages)}, and "
                                f"{' and '.join(gone)} {'is' if len(gone) == 1 else 'are'} not installed for "
                                f"{sys.executable}; nothing was run. Install: {INSTALL}")
