"""The substrings a regex cannot match without: what a raw-bytes prefilter can look for.

`required("Unable to find latest file at \\S+, if trying")` is `["Unable to find latest
file at"]`-ish: one of the returned strings occurs in every text the regex matches, so a
line holding none of them cannot match. Read from the regex's parse tree (the `re`
module's own parser), never by hand, so a rule edit cannot silently outgrow its literal.
"""

from __future__ import annotations

import json
import re

from triage.kb.sre import op as _op, parser as _parser

# A literal shorter than this matches too much chatter to be worth a prefilter entry.
MIN_LITERAL = 4


def required(pattern: str, flags: int = 0) -> tuple[list[str], bool] | None:
    """(alternatives, ignore_case): every match of `pattern` contains one alternative.

    None when the regex has no usable literal (a bare `\\d+`): the caller must refuse
    such a regex, since no substring test can stand in for it.
    """
    tree = _parser.parse(pattern, flags)
    ignore_case = bool(tree.state.flags & re.IGNORECASE) or _adds_ignore_case(tree)
    found = _best(list(tree))
    if not found:
        return None
    found = [s.strip() for s in found]
    if min(len(s) for s in found) < MIN_LITERAL:
        return None
    return sorted(set(found)), ignore_case


def looks_behind(pattern: str, flags: int = 0) -> bool:
    """Whether a match may depend on what stands before it (`^`, `\\b`, `\\B`, a lookbehind).
    A regex that does not look behind and finds nothing in a text finds nothing in any of its
    suffixes either: in a raw line, nothing in that line with its prefixes cut."""
    return _looks(list(_parser.parse(pattern, flags)))


_BEHIND = {_op.AT_BEGINNING, _op.AT_BEGINNING_STRING, _op.AT_BOUNDARY, _op.AT_NON_BOUNDARY}


def _looks(items) -> bool:
    for op, av in items:
        if op is _op.AT and av in _BEHIND:
            return True
        if op in (_op.ASSERT, _op.ASSERT_NOT):
            if av[0] < 0 or _looks(list(av[1])):  # a lookbehind, or a lookahead holding one
                return True
        elif op is _op.SUBPATTERN:
            if _looks(list(av[-1])):
                return True
        elif op is _op.BRANCH:
            if any(_looks(list(b)) for b in av[1]):
                return True
        elif op in (_op.MAX_REPEAT, _op.MIN_REPEAT) or op.name == "POSSESSIVE_REPEAT":
            if _looks(list(av[2])):
                return True
        elif op.name == "ATOMIC_GROUP":
            if _looks(list(av)):
                return True
        elif op is _op.GROUPREF_EXISTS:
            if any(_looks(list(b)) for b in av[1:] if b is not None):
                return True
    return False


MAX_ALTERNATIVES = 32


def _best(items: list) -> list[str] | None:
    """The most selective requirement of a sequence: a run of fixed text, or one group's.

    Fixed text runs across literals and across groups whose every branch is fixed:
    `E(?:rror|xception)` (how the parser stores `Error|Exception`) is ["Error", "Exception"].
    """
    candidates: list[list[str]] = []
    run: list[str] | None = None
    for item in items:
        fixed = _fixed(item)
        if fixed is not None and (run is None or len(run) * len(fixed) <= MAX_ALTERNATIVES):
            run = fixed if run is None else [a + b for a in run for b in fixed]
            continue
        if run:
            candidates.append(run)
        run = fixed
        if fixed is None and (sub := _inner(item)):
            candidates.append(sub)
    if run:
        candidates.append(run)
    candidates = [c for c in candidates if all(s.strip() for s in c)]
    if not candidates:
        return None
    # The longest shortest alternative filters best; each extra alternative costs a little.
    return max(candidates, key=lambda c: min(len(s.strip()) for s in c) - 3 * (len(c) - 1))


def _fixed(item) -> list[str] | None:
    """The texts this one item matches, when they are a few fixed strings."""
    op, av = item
    if op is _op.LITERAL:
        return [chr(av)]
    if op is _op.SUBPATTERN:
        return _fixed_seq(list(av[-1]))
    if op is _op.BRANCH:
        branches = [_fixed_seq(list(b)) for b in av[1]]
        if all(b is not None for b in branches) and sum(len(b) for b in branches) <= MAX_ALTERNATIVES:
            return [s for b in branches for s in b]
    return None


def _fixed_seq(items: list) -> list[str] | None:
    out = [""]
    for item in items:
        fixed = _fixed(item)
        if fixed is None or len(out) * len(fixed) > MAX_ALTERNATIVES:
            return None
        out = [a + b for a in out for b in fixed]
    return out


def _inner(item) -> list[str] | None:
    """A requirement inside a group that is not all fixed text."""
    op, av = item
    if op is _op.SUBPATTERN:
        return _best(list(av[-1]))
    if op is _op.BRANCH:
        branches = [_best(list(b)) for b in av[1]]
        return [s for b in branches for s in b] if all(branches) else None
    if op in (_op.MAX_REPEAT, _op.MIN_REPEAT) and av[0] >= 1:
        return _best(list(av[2]))
    return None


def _adds_ignore_case(tree) -> bool:
    for op, av in tree:
        if op is _op.SUBPATTERN and av[1] & re.IGNORECASE:
            return True
    return False


def encodings(literal: str) -> list[str]:
    """The literal as it stands in a plain line and inside a JSON string.

    Python's and Rust's JSON encoders (Vector) escape `"` and `\\`; Go's (Loki, and Fluent
    Bit's Go plugins) also writes `<`, `>`, `&` as \\u003c... Some encoders escape `/`.
    """
    escaped = json.dumps(literal, ensure_ascii=True)[1:-1]
    go = escaped.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    slash = escaped.replace("/", "\\/")
    return sorted({literal, escaped, go, slash})
