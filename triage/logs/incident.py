"""The structured incident extracted from a log: what the matcher reads."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

# Exceptions that only report another process's failure: never the cause.
WRAPPERS = {"ChildFailedError"}
_PEER_LOSS = re.compile(r"Connection closed by peer|Connection reset by peer|Broken pipe|ProcessGroupGloo|NCCL communicator was aborted")


@dataclass(slots=True)
class Frame:
    file: str
    line: int
    function: str
    code: str | None
    log_line: int  # where the `File "..."` line stands in the log


@dataclass(slots=True)
class RaisedException:
    type: str  # as printed, possibly dotted: torch.distributed....ChildFailedError
    message: str
    frames: list[Frame]
    log_line: int  # the line `Type: message` in the log
    # How this exception relates to the one printed after it in its chain:
    # "cause" (raise ... from), "context" (raised while handling), or None.
    link: str | None = None
    # Cut from a paste: no `Traceback (most recent call last):` above it, so frames (and the
    # lines around) that a whole log would show may be missing.
    cut: bool = False

    @property
    def short_type(self) -> str:
        return self.type.rsplit(".", 1)[-1]


@dataclass(slots=True)
class Chain:
    """One printed traceback group: exceptions innermost first, final last."""

    exceptions: list[RaisedException]
    ranks: list[int] = field(default_factory=list)
    copies: int = 1  # how many times the same chain was printed (ranks, retries)
    bare: bool = False  # only the `Type: message` line was in the log, no traceback

    @property
    def final(self) -> RaisedException:
        return self.exceptions[-1]

    def key(self) -> tuple:
        return tuple(
            (e.type, e.message, tuple((f.file, f.line, f.function) for f in e.frames))
            for e in self.exceptions
        )


@dataclass(slots=True)
class Incident:
    chains: list[Chain]
    line_count: int
    ranks: list[int]
    root_cause_rank: int | None = None
    exit_codes: dict[int, int] = field(default_factory=dict)  # rank -> exit code
    versions: dict[str, str] = field(default_factory=dict)
    paths: list[str] = field(default_factory=list)
    shards: list[str] = field(default_factory=list)
    size_mismatches: list[dict] = field(default_factory=list)
    missing_keys: list[str] = field(default_factory=list)
    unexpected_keys: list[str] = field(default_factory=list)
    truncated: bool = False
    decode_errors: int = 0

    @property
    def primary(self) -> RaisedException | None:
        return primary_exception(self)

    def to_json(self) -> dict:
        primary = self.primary
        return {
            "exception": _exception_json(primary) if primary else None,
            "chains": [
                {
                    "ranks": chain.ranks,
                    "copies": chain.copies,
                    "exceptions": [_exception_json(e) for e in chain.exceptions],
                }
                for chain in self.chains
            ],
            "line_count": self.line_count,
            "ranks": self.ranks,
            "root_cause_rank": self.root_cause_rank,
            "exit_codes": {str(rank): code for rank, code in sorted(self.exit_codes.items())},
            "versions": self.versions,
            "paths": self.paths,
            "shards": self.shards,
            "size_mismatches": self.size_mismatches,
            "missing_keys": self.missing_keys,
            "unexpected_keys": self.unexpected_keys,
            "truncated": self.truncated,
            "decode_errors": self.decode_errors,
        }


def _exception_json(exc: RaisedException) -> dict:
    return {
        "type": exc.type,
        "message": exc.message,
        "line": exc.log_line,
        "link": exc.link,
        "frames": [
            {k: v for k, v in asdict(f).items()} for f in exc.frames
        ],
    }


def primary_exception(incident: Incident) -> RaisedException | None:
    """The exception that best explains the failure.

    torchrun's ChildFailedError only reports a worker's death, and a rank that
    lost its peer (gloo "Connection closed by peer") died of another rank's
    failure, so both yield to a worker's own exception; so does a bare
    `AssertionError` with no message to another rank's that says what failed.
    Of two ranks' own failures the first printed wins: torchrun's "Root Cause
    (first observed failure)" is the first exit its monitor polled, which can
    be the later one.
    """
    if not incident.chains:
        return None

    def weight(chain: Chain) -> tuple:
        final = chain.final
        is_wrapper = final.short_type in WRAPPERS
        lost_peer = bool(_PEER_LOSS.search(final.message))
        return (not is_wrapper, not lost_peer, bool(final.message.strip()))

    return max(incident.chains, key=weight).final
