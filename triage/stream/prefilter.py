"""The cheap test that keeps the classifier off training chatter.

Two kinds of line matter to an incident:

* triggers open (or keep open) an incident: a traceback, an exception line, torchrun's
  and the deepspeed launcher's failure summaries, and every rule pattern that needs no
  exception (`line:` alone, e.g. DeepSpeed's "Unable to find latest file at" warning);
* context lines never open one, but rules read them from anywhere in the log (a boost's
  "[Torch] Begin Load checkpoint from", an `unless`, the pipeline topology line
  `RANK=0 STAGE=0 LAYERS=9` that DS-P003 requires). Each stream remembers the last line
  that matched each such regex and puts it before the incident's own lines.

Both come from the code and the rules, never from a hand-kept word list: the parser's own
markers (tracebacks.py, torchrun.py) and, for each rule regex, the substrings it cannot
match without (literals.py). Every such literal, in each form a shipper writes it (plain,
JSON-escaped), is searched for at once over the raw bytes; lines holding none are skipped
without being decoded. Hyperscan does that multi-literal search at hundreds of MB/s and
reports every occurrence with the literal's id; without it, the standard library's `re`
finds the same lines ~5x slower and the lines are then checked as text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from triage.logs import torchrun, tracebacks
from triage.kb.model import Conditions, Regex, Rule
from triage.kb.regex import ascii_searcher
from triage.logs.normalize import ANSI, strip_prefixes
from triage.logs.runs import RUN_START_TEXTS
from triage.stream.literals import encodings, looks_behind, required
from triage.stream.records import CRI_MARKERS, NOT_PLAIN_START, PARTIAL_MARKERS

try:
    import hyperscan
except ImportError:  # pragma: no cover - exercised by forcing the fallback in a test
    hyperscan = None


@dataclass(frozen=True)
class Literal:
    text: str
    ignore_case: bool = False

    def inside(self, other: Literal) -> bool:
        """Wherever `other` occurs, this literal occurs too."""
        if self.ignore_case:
            return self.text.lower() in other.text.lower()
        return not other.ignore_case and self.text in other.text


@dataclass(frozen=True)
class ContextCheck:
    regex: Regex
    literals: tuple[Literal, ...]
    used_by: tuple[str, ...]  # "DS-P003 pattern", "DS-R002 boost", ...
    run_scoped: bool = False  # a run_line: forgotten when a new run starts (a `line` is not)

    @property
    def raw_first(self) -> bool:
        """A raw line it does not match cannot match once its prefixes are cut (a cheap no)."""
        return not looks_behind(self.regex.pattern, self.regex.flags)

    @property
    def search(self):
        return self.regex.search


@dataclass(frozen=True)
class Form:
    """One literal as it may stand in the raw bytes, and what its presence implies."""

    data: bytes
    literal: Literal
    trigger: bool  # a line holding it holds a trigger literal
    checks: frozenset[int]  # the context checks whose literal it holds
    run_start: bool = False  # a line holding it may start a new run
    partial: bool = False  # a line holding it may be the head of a split line (CRI "P")

    @property
    def stop(self) -> bool:
        """The scanner must look at this line by itself, in order."""
        return self.trigger or self.run_start or self.partial


@dataclass(frozen=True)
class Hint:
    """What the raw line's literals say about its text: may it trigger, which checks to run."""

    trigger: bool
    checks: frozenset[int]
    run_start: bool = False
    partial: bool = False  # a form on the line may be the head of a split line
    stop: bool = False  # the scanner must look at the line by itself, in order (Form.stop)


NO_HIT = Hint(False, frozenset())

# A new run starts in a stream (a restarted pod, the next step of a job): the settings remembered
# for run_line conditions belong to the last one (triage/logs/runs.py says where runs start).
RUN_STARTS = tuple(Literal(text) for text in RUN_START_TEXTS)


class UnfilterableRule(ValueError):
    """A rule regex with no literal to look for: the prefilter could lose its incidents."""


def parser_triggers() -> list[Literal]:
    """What the log parser itself recognises as the start of a failure."""
    found = [Literal(tracebacks.TRACEBACK.rstrip(":"))]
    for regex in (tracebacks._BARE, torchrun._EXIT, torchrun._LAUNCHER_EXIT):
        alternatives, _ = required(regex.pattern)
        found.extend(Literal(s) for s in alternatives)
    return found


class Prefilter:
    def __init__(self, rules: list[Rule], *, fast: bool = True):
        triggers = parser_triggers()
        checks: dict[tuple[str, int], ContextCheck] = {}
        for rule, kind, cond, regex in _line_conditions(rules):
            found = required(regex.pattern, regex.flags)
            if found is None:
                raise UnfilterableRule(
                    f"{rule.id} {kind}: /{regex.pattern}/ has no fixed text of 4+ characters; "
                    "anchor it on a fixed piece of the message so `ds-triage stream` can prefilter it")
            literals = [Literal(s, found[1]) for s in found[0]]
            # the pattern fires on this line alone; with an exit code it needs the launcher's
            # exit line too, which triggers by itself: its line is then context. A run_line is
            # always context: the run's earlier lines (loading, settings) open nothing
            if kind == "pattern" and not cond.exception_scoped and cond.exit_code is None and regex is cond.line:
                triggers.extend(literals)
                continue
            scoped = regex is cond.run_line
            key = (regex.pattern, regex.flags, scoped)
            old = checks.get(key)
            used_by = (old.used_by if old else ()) + (f"{rule.id} {kind}",)
            checks[key] = ContextCheck(regex, tuple(literals), used_by, scoped)
        self.triggers = tuple(sorted(set(triggers), key=lambda lit: lit.text))
        self.context = tuple(checks.values())
        context_literals = {lit for check in self.context for lit in check.literals}
        self.forms = tuple(self._forms(set(self.triggers) | context_literals | set(RUN_STARTS)))
        # A split line's head may hold half a trigger: every CRI partial line is decoded.
        self.forms += tuple(Form(m, Literal(m.decode()), False, frozenset(), partial=True) for m in PARTIAL_MARKERS)
        self.matcher = HyperscanMatcher(self.forms) if (fast and hyperscan is not None) else ReMatcher(self.forms)
        # Decoded lines are short: for them one standard-library alternation is cheapest.
        self._trigger_text = re.compile("|".join(_pattern(lit) for lit in self.triggers))
        # Longest first, so at each position the longest literal starting there is reported;
        # the checks of every literal inside it come along (Form.checks).
        by_length = sorted(context_literals, key=lambda lit: (-len(lit.text), lit.text))
        self._context_text = re.compile("|".join(_pattern(lit) for lit in by_length))
        self._checks_of = {_fold(lit): self._implied(lit) for lit in context_literals}
        self._raw_first = [check.raw_first for check in self.context]
        self.run_scoped = frozenset(i for i, check in enumerate(self.context) if check.run_scoped)
        # The same tests on ASCII bytes, without decoding them (on ASCII, bytes and str regexes agree)
        self._ascii = [ascii_searcher(check.regex.pattern, check.regex.flags) if check.raw_first else None
                       for check in self.context]
        self._hints: dict[tuple[int, ...], Hint] = {}
        # A line is tested against a check only when it holds one of its literals: the regexes'
        # own literal test (Regex.found) would only repeat that
        self._finds = [check.regex.finder() for check in self.context]

    def _implied(self, lit: Literal) -> frozenset[int]:
        return frozenset(i for i, check in enumerate(self.context) if any(c.inside(lit) for c in check.literals))

    def _forms(self, literals: set[Literal]):
        for lit in sorted(literals, key=lambda lit: (lit.text, lit.ignore_case)):
            trigger = any(t.inside(lit) for t in self.triggers)
            run_start = any(r.inside(lit) for r in RUN_STARTS)
            implied = self._implied(lit)
            for form in encodings(lit.text):
                yield Form(form.encode("utf-8"), lit, trigger, implied, run_start)

    def hint(self, form_ids: list[int]) -> Hint:
        key = tuple(form_ids)
        hint = self._hints.get(key)
        if hint is None:  # the same few combinations recur on every chatter line
            forms = [self.forms[i] for i in form_ids]
            hint = Hint(any(f.trigger for f in forms), frozenset().union(*(f.checks for f in forms)),
                        any(f.run_start for f in forms), any(f.partial for f in forms), any(f.stop for f in forms))
            if len(self._hints) < 4096:
                self._hints[key] = hint
        return hint

    def is_trigger(self, text: str) -> bool:
        return self._trigger_text.search(text) is not None

    @staticmethod
    def is_run_start(text: str) -> bool:
        return any(lit.text in text for lit in RUN_STARTS)

    def context_hits(self, text: str, hint: Hint | None = None) -> list[int]:
        """Indices into `self.context` of the checks whose rule regex matches this line.

        With a hint from the raw line's literals only those checks are run; without one the
        text itself is searched, at every start position (finditer would skip overlaps).
        """
        if hint is not None:
            if len(hint.checks) == 1:  # the common case: one step line, one boost
                (only,) = hint.checks
                return [only] if self.check_matches(only, text) else []
            candidates = hint.checks
        else:
            candidates = set()
            match = self._context_text.search(text)
            while match is not None:
                found = match.group(0)
                candidates |= self._checks_of.get(found) or self._checks_of.get(found.lower(), frozenset())
                match = self._context_text.search(text, match.start() + 1)
        candidates = [i for i in candidates if self._may_match(i, text)]
        if not candidates:
            return []
        text = _rule_text(text)
        return sorted(i for i in candidates if self._finds[i](text))

    def check_matches(self, check: int, raw: str) -> bool:
        """Does context check `check` match this raw line, read as classify reads it?"""
        return self._may_match(check, raw) and self._finds[check](_rule_text(raw))

    def may_match_ascii(self, check: int, data: bytes, start: int, end: int) -> bool:
        """False when the line data[start:end], which the caller knows to be ASCII without an
        escape character, shows that the check cannot match it (as _may_match, undecoded)."""
        found = self._ascii[check]
        return found is None or found(data, start, end)

    def _may_match(self, check: int, raw: str) -> bool:
        """False when the raw line alone shows the check cannot match (cutting its prefixes
        costs more than the search)."""
        return not self._raw_first[check] or "\x1b" in raw or self._finds[check](raw)

    def grep_pattern(self) -> str:
        """The same literals as one POSIX extended regex, for `grep -E` side by side."""
        texts = sorted({form.data.decode("utf-8") for form in self.forms})
        return "|".join(re.sub(r"([][.^$*+?(){}|\\])", r"\\\1", s) for s in texts)


class HyperscanMatcher:
    """One Hyperscan database over the forms and the markers of a JSON record or a CRI line:
    every occurrence of every form (overlaps too) with its id, and whether a marker is in the
    block, in one pass over it."""

    complete = True

    def __init__(self, forms: tuple[Form, ...]):
        markers = [NOT_PLAIN_START, *(re.escape(m.decode()).encode() for m in CRI_MARKERS)]
        self._forms = len(forms)
        # A marker's match gets a start past any block's end: it sorts after every form's and is
        # popped off (there are at most len(markers): each reports its first match only).
        self._lengths = [len(f.data) for f in forms] + [-(1 << 62)] * len(markers)
        self._marked: tuple[bytes | None, bool] = (None, False)
        self._all = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        self._all.compile(
            expressions=[re.escape(f.data.decode("utf-8")).encode("utf-8") for f in forms] + markers,
            ids=list(range(len(forms) + len(markers))),
            elements=len(forms) + len(markers),
            flags=[hyperscan.HS_FLAG_CASELESS if f.literal.ignore_case else 0 for f in forms]
            + [hyperscan.HS_FLAG_SINGLEMATCH] * len(markers),
        )

    def hits(self, data: bytes) -> list[tuple[int, int]]:
        """(start offset, form id) of every occurrence, by position."""
        found: list[tuple[int, int]] = []
        lengths = self._lengths
        self._all.scan(data, match_event_handler=lambda i, _s, end, _f, _c: found.append((end - lengths[i], i)))
        found.sort()
        marked = False
        while found and found[-1][1] >= self._forms:
            found.pop()
            marked = True
        self._marked = (data, marked)
        return found

    def any_marker(self, data: bytes) -> bool:
        """Whether a JSON record or a CRI line may start in `data` (records.NOT_PLAIN_START, CRI_MARKERS),
        as the hits() of the same block found."""
        if self._marked[0] is not data:
            self.hits(data)
        return self._marked[1]


class ReMatcher:
    """The standard-library fallback: the lines are right, the forms per line may not be
    complete (matches do not overlap), so the caller checks those lines as text."""

    complete = False

    def __init__(self, forms: tuple[Form, ...]):
        by_length = sorted(range(len(forms)), key=lambda i: -len(forms[i].data))
        self.regex = re.compile(b"|".join(
            b"(?i:" + re.escape(forms[i].data) + b")" if forms[i].literal.ignore_case else re.escape(forms[i].data)
            for i in by_length))

    def hits(self, data: bytes) -> list[tuple[int, int]]:
        return [(m.start(), -1) for m in self.regex.finditer(data)]


def _pattern(lit: Literal) -> str:
    escaped = re.escape(lit.text)
    return f"(?i:{escaped})" if lit.ignore_case else escaped


def _rule_text(raw: str) -> str:
    """The line as a rule's `line` regex sees it in classify: rank tags, timestamps, colours gone."""
    return strip_prefixes(ANSI.sub("", raw) if "\x1b" in raw else raw)[0]


def _fold(lit: Literal) -> str:
    return lit.text.lower() if lit.ignore_case else lit.text


def _line_conditions(rules: list[Rule]):
    for rule in rules:
        conditions: list[tuple[str, Conditions]] = [("pattern", p.conditions) for p in rule.patterns]
        conditions += [("boost", b.conditions) for b in rule.boosts]
        conditions += [("unless", u) for u in rule.unless]
        for kind, cond in conditions:
            # run_line too: a stream forgets its context at each new run (RUN_STARTS), so what
            # it remembers is the failing run's, as run_line reads it
            for regex in (cond.line, cond.run_line):
                if regex is not None:
                    yield rule, kind, cond, regex
