"""Which rule literals a log holds, found in one Hyperscan pass instead of a substring search each.

A rule regex runs only when the log holds one of its literals (triage.kb.regex.Regex). Testing
them one `in` at a time reads a 400 KB log once per literal (~70 of them on a 5,000-line trace,
~5 ms); one Hyperscan scan over every literal of every rule reads it once (~0.7 ms). Compiling
the database costs ~35 ms and importing Hyperscan ~5 ms, more than a single classification
saves, so a process builds it at its second log: `serve`, `eval` and library callers that
classify many logs gain, a one-shot `ds-triage classify` pays nothing.

The answer is the substring test's: each literal's UTF-8 bytes, matched as bytes, are in the
text's UTF-8 encoding exactly when the literal is in the text (a lone surrogate, encoded as
"?", can only add a "?" that was not there: a literal reported present runs its regex, which
is the exact test).
"""

from __future__ import annotations

BUILD_AT = 2  # the log number at which a process builds the database

_seen = 0
_scanner: LiteralScanner | None = None
_unavailable = False  # Hyperscan cannot be imported or refused a literal: substring tests only


class LiteralScanner:
    """A Hyperscan block-mode database with one expression per literal."""

    def __init__(self, hyperscan, literals: frozenset[str]):
        self.literals = literals
        self._order = sorted(literal for literal in literals if literal)
        self._hyperscan = hyperscan
        self._db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        self._db.compile(
            expressions=[_escaped(literal) for literal in self._order],
            ids=list(range(len(self._order))),
            elements=len(self._order),
            flags=[hyperscan.HS_FLAG_SINGLEMATCH] * len(self._order),  # presence is all we need
        )

    def present(self, data: bytes) -> dict[str, bool]:
        """{literal: whether the text holds it} for every non-empty literal the database has."""
        found: set[int] = set()
        self._db.scan(data, match_event_handler=lambda index, _start, _end, _flags, _ctx: found.add(index))
        return {literal: index in found for index, literal in enumerate(self._order)}


def _escaped(literal: str) -> bytes:
    """The literal as a Hyperscan expression matching exactly its UTF-8 bytes."""
    return "".join(c if c.isascii() and c.isalnum() else "".join(f"\\x{b:02x}" for b in c.encode("utf-8"))
                   for c in literal).encode("ascii")


def presence(text: str, literals: frozenset[str]) -> dict[str, bool]:
    """Which of `literals` `text` holds, as far as the database answers (empty before it is
    built, or without Hyperscan): the caller tests the rest itself."""
    global _seen, _scanner, _unavailable
    _seen += 1
    if _seen < BUILD_AT or not literals or _unavailable:
        return {}
    if _scanner is None or not literals <= _scanner.literals:
        known = _scanner.literals if _scanner is not None else frozenset()
        _scanner = None
        try:
            import hyperscan  # not on every platform

            _scanner = LiteralScanner(hyperscan, literals | known)
        except Exception:  # ImportError, or hyperscan.error on a literal it refuses
            _unavailable = True
            return {}
    return _scanner.present(text.encode("utf-8", "replace"))
