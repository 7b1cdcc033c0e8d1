"""Rule regexes made readable: `^Error\\(s\\) in loading state_dict for [\\w.]+:` ->
`Error(s) in loading state_dict for ...:`.

Used for what people see and search (the runbook's symptoms, the index by error text),
never for matching. Alternatives are expanded (`(Missing|Unexpected) key` -> two texts),
digits become `N`, any other variable part `...`; anchors and lookarounds are dropped.
"""

from __future__ import annotations

import re
from functools import lru_cache

from triage.kb.sre import op as C, parser as sre

GAP = "..."
NUMBER = "N"
MAX_VARIANTS = 16
_DIGIT = "\x00"  # placeholders while expanding, replaced at the end
_ANY = "\x01"
_SPACE = "\x02"


def texts(pattern: str, limit: int = MAX_VARIANTS) -> list[str]:
    """The texts a regex stands for, most literal first, at most `limit`; [] for a regex
    that is all variable parts (`.+`) or cannot be parsed."""
    return list(_texts(pattern, limit))


@lru_cache(maxsize=4096)
def _texts(pattern: str, limit: int) -> tuple[str, ...]:
    # cached: the runbook's index reads every rule's regexes at each search (the chat asks many)
    try:
        parsed = sre.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return ()
    out: list[str] = []
    for variant in _sequence(list(parsed), limit):
        text = _finish(variant)
        if text and text != GAP and text not in out:
            out.append(text)
    return tuple(out)


def text(pattern: str) -> str:
    """One readable text for a regex: its first expansion (or the regex itself)."""
    found = texts(pattern, limit=1)
    return found[0] if found else pattern


def exception_names(pattern: str) -> list[str]:
    """Short exception names an `exception` regex stands for: `(?:_pickle\\.)?UnpicklingError`
    -> ['UnpicklingError']."""
    out: list[str] = []
    for name in texts(pattern):
        short = name.rsplit(".", 1)[-1]
        if re.fullmatch(r"[A-Za-z_]\w*", short) and short not in out:
            out.append(short)
    return out


def _sequence(items: list, limit: int) -> list[str]:
    variants = [""]
    for op, av in items:
        options = _node(op, av, limit)
        variants = [v + o for v in variants for o in options][:limit]
    return variants


def _node(op, av, limit: int) -> list[str]:
    if op is C.LITERAL:
        return [chr(av)]
    if op is C.SUBPATTERN:
        return _sequence(list(av[-1]), limit)
    if op is C.BRANCH:
        out: list[str] = []
        for branch in av[1]:
            out += _sequence(list(branch), limit)
        return out[:limit]
    if op in (C.MAX_REPEAT, C.MIN_REPEAT) or op is getattr(C, "POSSESSIVE_REPEAT", None):
        low, high, sub = av
        sub = list(sub)
        if _is_class(sub, C.CATEGORY_DIGIT):
            return [_DIGIT]
        if _is_space(sub):
            return [_SPACE]
        if low == 0 and high == 1:  # optional: with and without it
            return (_sequence(sub, limit) + [""])[:limit]
        if len(sub) == 1 and sub[0][0] is C.LITERAL and low == high:
            return [chr(sub[0][1]) * low]
        return [_ANY]
    if op is C.IN and _is_class([(op, av)], C.CATEGORY_DIGIT):
        return [_DIGIT]
    if op is C.IN and _is_space([(op, av)]):
        return [_SPACE]
    if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
        return [""]
    return [_ANY]  # ANY, IN, NOT_LITERAL, CATEGORY, GROUPREF...


def _is_class(items: list, category) -> bool:
    if len(items) != 1:
        return False
    op, av = items[0]
    if op is C.IN:
        return len(av) == 1 and av[0][0] is C.CATEGORY and av[0][1] is category
    return op is C.CATEGORY and av is category


def _is_space(items: list) -> bool:
    """\\s, or a class of white space only: [ \\t] (indentation that stays on its line)."""
    if _is_class(items, C.CATEGORY_SPACE):
        return True
    if len(items) != 1 or items[0][0] is not C.IN:
        return False
    return all(op is C.LITERAL and chr(av).isspace() for op, av in items[0][1])


def _finish(variant: str) -> str:
    variant = re.sub(f"[{_ANY}]+", _ANY, variant)
    variant = variant.replace(_DIGIT, NUMBER).replace(_SPACE, " ").replace(_ANY, GAP)
    variant = re.sub(r"\s+", " ", variant)
    variant = re.sub(r"(?:\.\.\.\s*){2,}", GAP + " ", variant)
    return variant.strip().rstrip(":").rstrip()  # "...for <class>:" reads as a sentence without it
