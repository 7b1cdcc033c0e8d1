"""Progress on stderr for the commands that take more than a second or two.

Meters (bytes hashed or read, shards checked, logs classified, lines streamed, with the time
elapsed) and the live tail of a DeepSpeed subprocess's own output. Shown when stderr is a
terminal, or when asked (`--progress`, e.g. into a CI log); never under `-q`. Off until a
command's front end turns it on (`configure`), so library callers (guarded_save, the chat, the
tests) print nothing.

The meters are tqdm's: small, pure Python, no dependencies of its own, already installed beside
DeepSpeed (which requires it), and it already does what is needed here (rates, byte units,
elapsed and remaining time, lines written above a bar). It is imported only when a meter is
shown: `classify` never imports this module, and a piped command without --progress never
imports tqdm. On a terminal a meter redraws one line; into a pipe or a file (--progress) each
refresh is a line of its own, at most one every few seconds, so a CI log stays readable.
"""

from __future__ import annotations

import sys

_state = {"on": False, "tty": False}
TAIL_PREFIX = "  | "


def configure(progress: bool = False, quiet: bool = False, stream=None) -> bool:
    """Turn progress on (stderr a terminal, or `progress`) or off (`quiet` wins); whether it is on."""
    tty = _isatty(stream if stream is not None else sys.stderr)
    _state.update(on=not quiet and (progress or tty), tty=tty)
    return _state["on"]


def shown() -> bool:
    return _state["on"]


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class _Null:
    """The meter when progress is off: every call does nothing."""

    n = 0

    def update(self, n=1):
        self.n += n

    def set_postfix_str(self, s="", refresh=True):
        pass

    def set_description_str(self, desc=None, refresh=True):
        pass

    def refresh(self):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Lines:
    """A file for tqdm off a terminal: each refresh a whole line, no carriage returns."""

    def __init__(self, out):
        self.out = out

    def write(self, text: str) -> None:
        text = text.replace("\r", "").strip("\n")
        if text.strip():
            self.out.write(text + "\n")

    def flush(self) -> None:
        self.out.flush()


def meter(desc: str, total: float | None = None, unit: str = "B", show: bool = True):
    """A progress meter (a context manager): `update(n)`, `set_postfix_str(s)`. Bytes (unit "B")
    are shown as KB/MB/GB; without `total`, a count and the time elapsed. Nothing is shown while
    progress is off, or with show=False (work that is fast this time)."""
    if not (_state["on"] and show):
        return _Null()
    from tqdm import tqdm

    tty = _state["tty"]
    in_bytes = unit == "B"
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=in_bytes, unit_divisor=1024 if in_bytes else 1000,
                file=sys.stderr if tty else _Lines(sys.stderr), mininterval=0.2 if tty else 3.0,
                dynamic_ncols=tty, ncols=None if tty else 100, leave=True,
                bar_format=None if total else "{desc}: {n_fmt} {unit} [{elapsed}]{postfix}")


def write(line: str) -> None:
    """A line on stderr when progress is shown, above any meter being drawn."""
    if not _state["on"]:
        return
    if "tqdm" in sys.modules:
        from tqdm import tqdm

        tqdm.write(line, file=sys.stderr if _state["tty"] else _Lines(sys.stderr))
    else:
        print(line, file=sys.stderr, flush=True)


def tail(line: str) -> None:
    """One line of a subprocess's own output (DeepSpeed's), as it comes."""
    write(TAIL_PREFIX + line)
