"""The structured incident extracted from a log: what the matcher reads."""

from __future__ import annotations

import re
from triage.record import Record

# Exceptions that only report another process's failure: never the cause.
WRAPPERS = {"ChildFailedError"}
_PEER_LOSS = re.compile(r"Connection closed by peer|Connection reset by peer|Broken pipe|ProcessGroupGloo|NCCL communicator was aborted")


class Frame(Record):
    __slots__ = _fields = ("file", "line", "function", "code", "log_line")

    def __init__(self, file: str, line: int, function: str, code: str | None, log_line: int):
        self.file, self.line, self.function, self.code = file, line, function, code
        self.log_line = log_line  # where the `File "..."` line stands in the log


class RaisedException(Record):
    __slots__ = _fields = ("type", "message", "frames", "log_line", "link", "cut")

    def __init__(self, type: str, message: str, frames: list[Frame], log_line: int, link: str | None = None,
                 cut: bool = False):
        self.type = type  # as printed, possibly dotted: torch.distributed....ChildFailedError
        self.message = message
        self.frames = frames
        self.log_line = log_line  # the line `Type: message` in the log
        # How this exception relates to the one printed after it in its chain:
        # "cause" (raise ... from), "context" (raised while handling), or None.
        self.link = link
        # Cut from a paste: no `Traceback (most recent call last):` above it, so frames (and the
        # lines around) that a whole log would show may be missing.
        self.cut = cut

    @property
    def short_type(self) -> str:
        return self.type.rsplit(".", 1)[-1]


class Chain(Record):
    """One printed traceback group: exceptions innermost first, final last."""

    __slots__ = _fields = ("exceptions", "ranks", "copies", "bare")

    def __init__(self, exceptions: list[RaisedException], ranks: list[int] | None = None, copies: int = 1,
                 bare: bool = False):
        self.exceptions = exceptions
        self.ranks = [] if ranks is None else ranks
        self.copies = copies  # how many times the same chain was printed (ranks, retries)
        self.bare = bare  # only the `Type: message` line was in the log, no traceback

    @property
    def final(self) -> RaisedException:
        return self.exceptions[-1]

    def key(self) -> tuple:
        return tuple(
            (e.type, e.message, tuple((f.file, f.line, f.function) for f in e.frames))
            for e in self.exceptions
        )


class Incident(Record):
    _fields = ("chains", "line_count", "ranks", "root_cause_rank", "exit_codes", "versions", "paths",
               "shards", "size_mismatches", "missing_keys", "unexpected_keys", "truncated", "decode_errors", "partition")
    __slots__ = _fields + ("_primary",)

    def __init__(self, chains: list[Chain], line_count: int, ranks: list[int], root_cause_rank: int | None = None,
                 exit_codes: dict[int, int] | None = None, versions: dict[str, str] | None = None,
                 paths: list[str] | None = None, shards: list[str] | None = None,
                 size_mismatches: list[dict] | None = None, missing_keys: list[str] | None = None,
                 unexpected_keys: list[str] | None = None, truncated: bool = False, decode_errors: int = 0,
                 partition: tuple[int, int] | None = None):
        self.chains, self.line_count, self.ranks, self.root_cause_rank = chains, line_count, ranks, root_cause_rank
        self.exit_codes = {} if exit_codes is None else exit_codes  # rank -> exit code
        self.versions = {} if versions is None else versions
        self.paths = [] if paths is None else paths
        self.shards = [] if shards is None else shards
        self.size_mismatches = [] if size_mismatches is None else size_mismatches
        self.missing_keys = [] if missing_keys is None else missing_keys
        self.unexpected_keys = [] if unexpected_keys is None else unexpected_keys
        self.truncated, self.decode_errors = truncated, decode_errors
        self.partition = partition  # a flat fp32 partition's elements: (saved, the load's), torch's copy_ error

    @property
    def primary(self) -> RaisedException | None:
        # Once: it weighs every chain, and a log of 100,000 distinct exceptions has as many chains.
        cached = getattr(self, "_primary", None)
        if cached is None or cached[0] is not self.chains:
            cached = self._primary = (self.chains, primary_exception(self))
        return cached[1]

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
            {name: getattr(f, name) for name in Frame._fields} for f in exc.frames
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
