"""Rule regexes on RE2 where RE2 can express them, on `re` where it cannot.

RE2 has no backtracking: its time is linear in the text for every pattern, so no log
can make a rule slow. Python's `re` backtracks (`^\\s*x\\s*$` over a run of blank lines
is quadratic). A rule pattern is parsed by `re`'s own parser and written out again in
RE2's syntax, with `re`'s meaning kept where the two differ:

- `\\s`, `\\d`, `\\w` are Unicode classes in `re` and ASCII ones in RE2: they are written
  as the same Unicode sets (`\\s` as str.isspace()'s 29 code points, `\\d` as `\\p{Nd}`,
  `\\w` as `[\\p{L}\\p{N}_]`);
- `^` and `$` follow the pattern's MULTILINE flag; without it `$` is the end of the text
  (the texts rules see, messages and names, are stripped: none ends in a newline);
- `\\b` stays RE2's ASCII word boundary: it differs from `re`'s only next to a non-ASCII
  letter or digit.

Lookarounds, backreferences, conditionals, atomic groups and counted repeats over 1,000
have no RE2 form: those patterns stay on `re`, and `rules lint` and the suite time every
rule pattern on pump strings (triage.kb.pump), so they must be linear there too.
`DS_TRIAGE_REGEX_ENGINE=re` runs everything on `re` (to compare the two); without the
google-re2 package everything runs on `re` as well.
"""

from __future__ import annotations

import os
import re

from triage.kb.sre import MAXREPEAT, op, parser

# str.isspace(): what `re`'s \s matches in a str pattern.
_SPACE = r"\x{9}-\x{d}\x{1c}-\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"
_NOT_SPACE = (r"\x{0}-\x{8}\x{e}-\x{1b}\x{21}-\x{84}\x{86}-\x{9f}\x{a1}-\x{167f}\x{1681}-\x{1fff}\x{200b}-\x{2027}"
              r"\x{202a}-\x{202e}\x{2030}-\x{205e}\x{2060}-\x{2fff}\x{3001}-\x{10ffff}")
# Category -> (class body, negated): a negated body is the complement of the set it names.
_UNICODE = {
    op.CATEGORY_DIGIT: (r"\p{Nd}", False),
    op.CATEGORY_NOT_DIGIT: (r"\P{Nd}", False),
    op.CATEGORY_SPACE: (_SPACE, False),
    op.CATEGORY_NOT_SPACE: (_NOT_SPACE, False),
    op.CATEGORY_WORD: (r"\p{L}\p{N}_", False),
    op.CATEGORY_NOT_WORD: (r"\p{L}\p{N}_", True),
}
_ASCII = {
    op.CATEGORY_DIGIT: ("0-9", False),
    op.CATEGORY_NOT_DIGIT: ("0-9", True),
    op.CATEGORY_SPACE: (r"\x{9}-\x{d}\x{20}", False),
    op.CATEGORY_NOT_SPACE: (r"\x{9}-\x{d}\x{20}", True),
    op.CATEGORY_WORD: ("0-9A-Za-z_", False),
    op.CATEGORY_NOT_WORD: ("0-9A-Za-z_", True),
}
RE2_MAX_REPEAT = 1000
# RE2's budget for one program and its DFA cache (its default is 8 MiB): ~500 rule patterns
# in a long-running `serve` must not hold gigabytes. Over it, RE2 runs its NFA: still linear.
MAX_MEM = 1 << 20


class Unsupported(Exception):
    """The pattern has no RE2 form with the same meaning."""


def to_re2(pattern: str, flags: int = 0) -> str | None:
    """`pattern` in RE2 syntax with `re`'s meaning, or None when RE2 cannot express it."""
    try:
        tree = parser.parse(pattern, flags)
        if tree.state.flags & re.LOCALE:
            return None
        body = _sequence(list(tree), tree.state.flags)
    except (Unsupported, re.error, RecursionError, OverflowError):
        return None
    return f"(?i:{body})" if tree.state.flags & re.IGNORECASE else body


def _sequence(items: list, flags: int) -> str:
    return "".join(_item(kind, av, flags) for kind, av in items)


def _char(code: int) -> str:
    c = chr(code)
    return c if c.isascii() and c.isalnum() else f"\\x{{{code:x}}}"


def _item(kind, av, flags: int) -> str:
    if kind is op.LITERAL:
        return _char(av)
    if kind is op.NOT_LITERAL:
        return f"[^{_char(av)}]"
    if kind is op.ANY:
        return "(?s:.)" if flags & re.DOTALL else "."
    if kind is op.IN:
        return _class(av, flags)
    if kind is op.BRANCH:
        return "(?:" + "|".join(_sequence(list(branch), flags) for branch in av[1]) + ")"
    if kind is op.SUBPATTERN:
        _group, add, delete, inner = av
        if (add | delete) & (re.ASCII | re.UNICODE | re.LOCALE):
            raise Unsupported("a group that switches ASCII matching")  # where re itself is inconsistent
        inner_flags = (flags | add) & ~delete
        mode = ("i" if add & re.IGNORECASE else "") + ("-i" if delete & re.IGNORECASE else "")
        return f"(?{mode}:{_sequence(list(inner), inner_flags)})"
    if kind in (op.MAX_REPEAT, op.MIN_REPEAT):
        low, high, inner = av
        if low > RE2_MAX_REPEAT or (high != MAXREPEAT and high > RE2_MAX_REPEAT):
            raise Unsupported("counted repeat over RE2's 1,000")
        if (low, high) == (0, MAXREPEAT):
            quantifier = "*"
        elif (low, high) == (1, MAXREPEAT):
            quantifier = "+"
        elif (low, high) == (0, 1):
            quantifier = "?"
        elif high == MAXREPEAT:
            quantifier = f"{{{low},}}"
        elif low == high:
            quantifier = f"{{{low}}}"
        else:
            quantifier = f"{{{low},{high}}}"
        lazy = "?" if kind is op.MIN_REPEAT else ""
        return f"(?:{_sequence(list(inner), flags)}){quantifier}{lazy}"
    if kind is op.AT:
        return _at(av, flags)
    raise Unsupported(str(kind))  # lookarounds, backreferences, conditionals, atomic groups


def _at(where, flags: int) -> str:
    multiline = flags & re.MULTILINE
    if where is op.AT_BEGINNING:
        return "(?m:^)" if multiline else r"\A"
    if where is op.AT_BEGINNING_STRING:
        return r"\A"
    if where is op.AT_END:
        return "(?m:$)" if multiline else r"\z"
    if where is op.AT_END_STRING:
        return r"\z"
    if where is op.AT_BOUNDARY:
        return r"\b"
    if where is op.AT_NON_BOUNDARY:
        return r"\B"
    raise Unsupported(str(where))


def _class(items: list, flags: int) -> str:
    categories = _ASCII if flags & re.ASCII else _UNICODE
    negate = False
    positive: list[str] = []
    complements: list[str] = []
    for kind, av in items:
        if kind is op.NEGATE:
            negate = True
        elif kind is op.LITERAL:
            positive.append(_char(av))
        elif kind is op.RANGE:
            positive.append(f"{_char(av[0])}-{_char(av[1])}")
        elif kind is op.CATEGORY:
            body, negated = categories[av]
            (complements if negated else positive).append(body)
        else:
            raise Unsupported(str(kind))
    if not complements:
        return ("[^" if negate else "[") + "".join(positive) + "]"
    if negate:  # not (P or not N) = N and not P: only when P is empty and N is one set
        if positive or len(complements) > 1:
            raise Unsupported("negated class holding a negated category")
        return f"[{complements[0]}]"
    # P or (not N1) or (not N2): one character from any of the sets
    parts = ([f"[{''.join(positive)}]"] if positive else []) + [f"[^{body}]" for body in complements]
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def engine_wanted() -> str:
    return "re" if os.environ.get("DS_TRIAGE_REGEX_ENGINE", "").lower() == "re" else "re2"


_RE2_LIB: object = None  # the google-re2 extension, False when it cannot be imported


def _re2_lib():
    global _RE2_LIB
    if _RE2_LIB is None:
        try:  # a C extension: imported on the first rule regex, ~3 ms
            import re2

            _RE2_LIB = re2
        except ImportError:
            _RE2_LIB = False
    return _RE2_LIB


# What a rule regex needs before its first match, read from `re`'s parse tree: its RE2 form
# and the literals every match contains (triage.stream.literals). Parsing ~300 patterns
# would cost a cold classify ~20 ms, so the rules cache (triage.kb.index) keeps them:
# bump PLAN_VERSION when to_re2 or `required` changes.
PLAN_VERSION = "plan-1"
_plans: dict[str, tuple[str | None, tuple[str, ...]]] = {}  # "flags:pattern" -> (RE2 form, literals)


def plan(pattern: str, flags: int = 0) -> tuple[str | None, tuple[str, ...]]:
    """(RE2 form or None, literals one of which every match holds, or () when unknown)."""
    key = f"{flags}:{pattern}"
    if key not in _plans:
        from triage.stream.literals import required

        try:
            found = required(pattern, flags)
        except (re.error, RecursionError, OverflowError):
            found = None
        literals = tuple(found[0]) if found and not found[1] else ()  # case-insensitive: no substring test
        _plans[key] = (to_re2(pattern, flags), literals)
    return _plans[key]


def plans(patterns) -> dict[str, list]:
    """{"flags:pattern": [RE2 form, literals]} for (pattern, flags) pairs, for the rules cache."""
    return {f"{flags}:{pattern}": list(plan(pattern, flags)) for pattern, flags in patterns}


def remember(table: dict[str, list]) -> None:
    """Plans read back from the rules cache."""
    for key, (translated_, literals) in table.items():
        _plans[key] = (translated_, tuple(literals))


_known: tuple[int, frozenset[str]] = (0, frozenset())


def known_literals() -> frozenset[str]:
    """Every literal of every plan so far: what triage.kb.literal_scan looks for in one pass."""
    global _known
    if _known[0] != len(_plans):
        _known = (len(_plans), frozenset(literal for _, literals in _plans.values() for literal in literals))
    return _known[1]


def ascii_searcher(pattern: str, flags: int = 0):
    """found(data, start, end): whether the pattern matches in data[start:end], bytes the caller
    knows to be ASCII (on ASCII, a bytes search and a str search agree); None when the pattern
    cannot run on bytes. RE2 where it can: `re` tries each branch of an alternation of literals
    at every position, ~7 us a line against ~1."""
    compiled = compile_pattern(pattern, flags) if pattern.isascii() else None
    if isinstance(compiled, RE2Pattern):
        return compiled.in_ascii
    try:
        regex = re.compile(pattern.encode("ascii"), flags)
    except (re.error, UnicodeEncodeError):  # e.g. a (?u) flag, which bytes patterns refuse
        return None
    return lambda data, start, end: regex.search(data[start:end]) is not None


def compile_pattern(pattern: str, flags: int = 0):
    """An RE2 program with `re`'s meaning when there is one, else `re.compile`."""
    if engine_wanted() == "re2":
        lib = _re2_lib()
        translated_ = plan(pattern, flags)[0] if lib else None
        if translated_ is not None:
            try:
                return RE2Pattern(lib, translated_, pattern, flags)
            except Exception:  # re2.error: over its memory budget, or a construct it refuses
                pass
    return re.compile(pattern, flags)


class Span:
    """What callers read of a match: where it starts and ends, and its text."""

    __slots__ = ("string", "_start", "_end")

    def __init__(self, string: str, start: int, end: int):
        self.string, self._start, self._end = string, start, end

    def start(self) -> int:
        return self._start

    def end(self) -> int:
        return self._end

    def span(self) -> tuple[int, int]:
        return self._start, self._end

    def group(self, index: int = 0) -> str:
        if index != 0:
            raise IndexError("an RE2 rule regex keeps no groups")
        return self.string[self._start:self._end]


# The last text encoded to UTF-8: a log's line regexes all search the same joined text.
_encoded: tuple = (None, b"", True)


def _utf8(text: str) -> tuple[bytes, bool]:
    global _encoded
    last, data, ascii_only = _encoded
    if last is not text:
        ascii_only = text.isascii()
        # A lone surrogate becomes one "?": one character still, so offsets map back.
        data = text.encode("utf-8", "replace")
        if len(text) > 4096:
            _encoded = (text, data, ascii_only)
    return data, ascii_only


class RE2Pattern:
    """A compiled RE2 program with the part of `re.Pattern`'s interface rules use."""

    __slots__ = ("pattern", "flags", "translated", "_program", "_anchors")

    def __init__(self, lib, translated: str, pattern: str, flags: int):
        options = lib.Options()
        options.never_capture = True  # rules read where a match is, never its groups
        options.log_errors = False  # RE2 would print to stderr (a DFA over budget falls back to its NFA)
        options.max_mem = MAX_MEM
        self._program = lib._re2.RE2(translated.encode("utf-8"), options)
        if not self._program.ok():
            raise lib.error(self._program.error())
        anchor = lib._re2.RE2.Anchor
        self._anchors = (anchor.UNANCHORED, anchor.ANCHOR_START, anchor.ANCHOR_BOTH)
        self.pattern, self.flags, self.translated = pattern, flags, translated

    def _run(self, anchor, text: str, pos: int) -> Span | None:
        data, ascii_only = _utf8(text)
        pos = max(0, min(pos, len(text)))
        start = pos if ascii_only or not pos else len(text[:pos].encode("utf-8", "replace"))
        found, end = self._program.Match(anchor, data, start, len(data))[0]
        if found < 0:
            return None
        if not ascii_only:  # byte offsets to character offsets (a match never splits a character)
            head = len(data[:found].decode("utf-8", "replace"))
            found, end = head, head + len(data[found:end].decode("utf-8", "replace"))
        return Span(text, found, end)

    def search(self, text: str, pos: int = 0) -> Span | None:
        return self._run(self._anchors[0], text, pos)

    def found(self, text: str) -> bool:
        """search(text) is not None, without making the span."""
        data, _ = _utf8(text)
        return self._program.Match(self._anchors[0], data, 0, len(data))[0][0] >= 0

    def in_ascii(self, data: bytes, start: int, end: int) -> bool:
        """Whether it matches data[start:end], ASCII bytes, read as a text of its own (`^`, `$`,
        `\\b` at its ends), without decoding it: on ASCII, byte offsets are character offsets."""
        if start or end != len(data):
            data = data[start:end]  # RE2 (and `re`) would see `$` or `^` only at the whole buffer's ends
        return self._program.Match(self._anchors[0], data, 0, len(data))[0][0] >= 0

    def match(self, text: str, pos: int = 0) -> Span | None:
        return self._run(self._anchors[1], text, pos)

    def fullmatch(self, text: str, pos: int = 0) -> Span | None:
        return self._run(self._anchors[2], text, pos)


class Regex:
    """A rule regex compiled on first use, and only once a literal it needs is in the text.

    Compiling all ~500 of them costs more than a whole classification, and most are never
    reached: a pattern stops at its first condition that fails, and an exception type or a
    log without the pattern's literal (`Unable to find latest file at`) cannot match it."""

    __slots__ = ("pattern", "flags", "_compiled", "_literals")

    def __init__(self, pattern: str, flags: int = 0):
        self.pattern = pattern
        self.flags = flags
        self._compiled = None
        self._literals: tuple[str, ...] | None = None

    def compiled(self):
        if self._compiled is None:
            self._compiled = compile_pattern(self.pattern, self.flags)
        return self._compiled

    @property
    def engine(self) -> str:
        return "re2" if isinstance(self.compiled(), RE2Pattern) else "re"

    def _absent(self, text: str, present: dict[str, bool] | None = None) -> bool:
        """True when no literal the pattern needs is in `text` (a substring search: linear).
        `present`: the answers for this same text so far, by literal (rules share literals)."""
        if self._literals is None:
            self._literals = plan(self.pattern, self.flags)[1]
        if present is None:
            return bool(self._literals) and not any(literal in text for literal in self._literals)
        for literal in self._literals:
            found = present.get(literal)
            if found is None:
                found = present[literal] = literal in text
            if found:
                return False
        return bool(self._literals)

    def search(self, text: str, pos: int = 0, present: dict[str, bool] | None = None):
        """`present`: a memo of which literals `text` holds, kept by the caller for that one text."""
        return None if self._absent(text, present) else self.compiled().search(text, pos)

    def found(self, text: str) -> bool:
        """Whether it matches somewhere in `text` (search, without the match)."""
        if self._absent(text):
            return False
        compiled = self.compiled()
        return compiled.found(text) if type(compiled) is RE2Pattern else compiled.search(text) is not None

    def finder(self):
        """found(text) without the literal test first: for a caller whose texts hold a literal."""
        compiled = self.compiled()
        if type(compiled) is RE2Pattern:
            return compiled.found
        return lambda text: compiled.search(text) is not None

    def match(self, text: str):
        return None if self._absent(text) else self.compiled().match(text)

    def fullmatch(self, text: str):
        return None if self._absent(text) else self.compiled().fullmatch(text)
