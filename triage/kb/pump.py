"""Pump tests: does a regex's time grow faster than the text it reads?

A backtracking engine is slow on text that nearly matches over and over: `^\\s*x` under
MULTILINE on a run of blank lines, `A[\\s\\S]*B` on `A` repeated, `(a+)+$` on `aaa…!`.
`pumps(pattern)` builds such texts from the pattern itself (`re`'s parse tree: each
quantified part's own characters, after the text that leads to it; the pattern's text
up to each quantifier, repeated) and from generic runs (spaces, letters, digits, `.`
`:` `/` `(` `[` `,`, blank lines, words and spaces), each with and without a character
that spoils the match at the end. `superlinear(run, pumps)` times `run` on each at
SIZE and GROWTH x SIZE characters and returns the first that grows clearly faster than
the text (ratio over RATIO and time over FLOOR, confirmed once more at the next size).
Used by `ds-triage rules lint` and tests/test_linear_regex.py.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from dataclasses import dataclass
from typing import Callable

from triage.kb.sre import MAXREPEAT, op, parser

SIZE = 4096  # characters of the first text; linear patterns take microseconds on it
GROWTH = 4  # the second text is this much longer: 4x time is linear, 16x quadratic
# Measured on this 2-core machine, CPU time, best of 3: the 510 pumps on which a regex of the
# package or the rules (both engines) takes over FLOOR grow by 2.3-5.3x (median 4.0, p99 4.7)
# from SIZE to GROWTH*SIZE; the 12 quadratic regexes this replaced, on their attacks
# (tests/hostile/logs.py), by 13.8-17.0x; an exponential one never finishes.
RATIO = 8.0
FLOOR = 0.0005  # seconds at the larger size below which nothing is timed further: noise
BUDGET = 1.0  # seconds one match may take before it counts as super-linear outright
GENERIC_UNITS = (" ", "a", "1", ".", ":", "/", "(", "[", ",", "\n", " \n", "\t", "a ", "a.", "1.", "a:", "_", "'", '"', "-")
SPOILERS = ("", "\x00")
MAX_PUMPS = 160
INF = float("inf")


@dataclass(frozen=True)
class Pump:
    prefix: str
    unit: str
    suffix: str

    def text(self, size: int) -> str:
        count = max(1, (size - len(self.prefix) - len(self.suffix)) // len(self.unit))
        return self.prefix + self.unit * count + self.suffix

    def __str__(self) -> str:
        head = f"{self.prefix[:40]!r} + " if self.prefix else ""
        tail = f" + {self.suffix!r}" if self.suffix else ""
        return f"{head}{self.unit[:40]!r} x N{tail}"


@dataclass(frozen=True)
class Slow:
    """A pump on which the regex grows super-linearly."""

    pump: Pump
    sizes: tuple[int, ...]
    seconds: tuple[float, ...]  # inf: over BUDGET

    def __str__(self) -> str:
        times = ", ".join(f"{s:,} chars {_ms(t)}" for s, t in zip(self.sizes, self.seconds))
        return f"on {self.pump}: {times}"


def _ms(seconds: float) -> str:
    return f"over {BUDGET:g} s" if seconds == INF else f"{seconds * 1000:.1f} ms"


# --- pump strings from the pattern ----------------------------------------------------

_PROBE_CHARS = "a ZA1._:/-(\t\n,'\"[]"


def _class_chars(items: list, flags: int) -> list[str]:
    """A few characters the class accepts, varied (a letter, a space, a digit...)."""
    negate = any(kind is op.NEGATE for kind, _ in items)
    members = []
    for kind, av in items:
        if kind is op.LITERAL:
            members.append(chr(av))
        elif kind is op.RANGE:
            members.append(chr(av[0]))
    if not negate and members and not any(kind is op.CATEGORY for kind, _ in items):
        return list(dict.fromkeys(members))[:3]
    pattern = _class_source(items)
    if pattern is None:
        return members[:3] or ["a"]
    accepts = re.compile(pattern, flags & (re.IGNORECASE | re.ASCII))
    found = [c for c in _PROBE_CHARS if accepts.fullmatch(c)]
    return (list(dict.fromkeys(members + found)) if not negate else found)[:3] or ["\x01"]


_CATEGORY_SOURCE = {
    op.CATEGORY_DIGIT: r"\d", op.CATEGORY_NOT_DIGIT: r"\D", op.CATEGORY_SPACE: r"\s",
    op.CATEGORY_NOT_SPACE: r"\S", op.CATEGORY_WORD: r"\w", op.CATEGORY_NOT_WORD: r"\W",
}


def _class_source(items: list) -> str | None:
    out = []
    for kind, av in items:
        if kind is op.NEGATE:
            out.append("^")
        elif kind is op.LITERAL:
            out.append(re.escape(chr(av)))
        elif kind is op.RANGE:
            out.append(f"{re.escape(chr(av[0]))}-{re.escape(chr(av[1]))}")
        elif kind is op.CATEGORY and av in _CATEGORY_SOURCE:
            out.append(_CATEGORY_SOURCE[av])
        else:
            return None
    return "[" + "".join(out) + "]"


def _witnesses(kind, av, flags: int) -> list[str]:
    """A few short texts this one item matches (the first is the plainest)."""
    if kind is op.LITERAL:
        return [chr(av)]
    if kind is op.NOT_LITERAL:
        return ["a" if chr(av) != "a" else "b", " "]
    if kind is op.ANY:
        return ["a", " "]
    if kind is op.IN:
        return _class_chars(av, flags)
    if kind is op.BRANCH:
        return [w for branch in av[1] for w in _sequence_witnesses(list(branch), flags)[:1]][:4] or [""]
    if kind is op.SUBPATTERN:
        return _sequence_witnesses(list(av[-1]), (flags | av[1]) & ~av[2])
    if kind in (op.MAX_REPEAT, op.MIN_REPEAT):
        low, _high, inner = av
        return [w * max(low, 1) for w in _sequence_witnesses(list(inner), flags)[:2]]
    if kind is op.GROUPREF:
        return ["a"]
    return [""]  # anchors, lookarounds: no text of their own


def _sequence_witnesses(items: list, flags: int) -> list[str]:
    each = [_witnesses(kind, av, flags) for kind, av in items]
    firsts = [w[0] for w in each]
    out = ["".join(firsts)]
    for i, options in enumerate(each):  # vary one item at a time
        for alternative in options[1:2]:
            out.append("".join(firsts[:i]) + alternative + "".join(firsts[i + 1:]))
    return list(dict.fromkeys(out))[:4]


def _walk(items: list, flags: int, lead: str, found: list[tuple[str, str]], spoilers: list[str]) -> None:
    """(text leading to it, repeated unit) for every quantified part, and the
    pattern's own text up to each quantifier as a unit; what a negative lookaround
    refuses, as a spoiler to end a pump with."""
    before = lead
    for kind, av in items:
        if kind in (op.MAX_REPEAT, op.MIN_REPEAT):
            low, high, inner = av
            if high == MAXREPEAT or high > 1:
                for unit in _sequence_witnesses(list(inner), flags):
                    if unit:
                        found.append((before, unit))
                if before:
                    found.append(("", before))
            _walk(list(inner), flags, before, found, spoilers)
        elif kind is op.SUBPATTERN:
            _walk(list(av[-1]), (flags | av[1]) & ~av[2], before, found, spoilers)
        elif kind is op.BRANCH:
            for branch in av[1]:
                _walk(list(branch), flags, before, found, spoilers)
        elif kind in (op.ASSERT, op.ASSERT_NOT):
            if kind is op.ASSERT_NOT:
                spoilers.extend(w for w in _sequence_witnesses(list(av[1]), flags)[:1] if w)
            _walk(list(av[1]), flags, before, found, spoilers)
        before += _witnesses(kind, av, flags)[0]


def pumps(pattern: str, flags: int = 0) -> list[Pump]:
    """Texts that make a backtracking regex work hard, built from `pattern` and generic."""
    try:
        tree = parser.parse(pattern, flags)
    except (re.error, RecursionError, OverflowError):
        return []
    flags = tree.state.flags
    items = list(tree)
    found: list[tuple[str, str]] = []
    spoilers = list(SPOILERS)
    _walk(items, flags, "", found, spoilers)
    whole = _sequence_witnesses(items, flags)
    for text in whole:
        if text:
            found.append(("", text))  # near matches, repeated
            found.append(("", text[:-1] or text))
    derived = [Pump(prefix, unit, suffix) for prefix, unit in dict.fromkeys(found) for suffix in dict.fromkeys(spoilers)]
    lead = whole[0][: max(1, len(whole[0]) // 2)] if items and items[0][0] is op.LITERAL else ""
    generic = [Pump(prefix, unit, suffix) for unit in GENERIC_UNITS for prefix in dict.fromkeys(("", lead))
               for suffix in SPOILERS]
    return list(dict.fromkeys(derived[:MAX_PUMPS] + generic))


# --- timing -------------------------------------------------------------------------

class _OverBudget(Exception):
    pass


def _raise_over_budget(signum, frame):
    raise _OverBudget()


class Budget:
    """SIGALRM after `seconds` interrupts a match (sre checks signals), in the main thread;
    elsewhere matches run to the end."""

    def __init__(self, seconds: float = BUDGET):
        self.seconds = seconds

    def __enter__(self):
        self.armed = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
        if self.armed:
            self.previous = signal.signal(signal.SIGALRM, _raise_over_budget)
        return self

    def __exit__(self, *exc):
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)

    def timed(self, run: Callable[[str], object], text: str, repeats: int) -> float:
        """Best of `repeats` runs, in seconds of this thread's CPU time (time spent waiting
        for a core on a busy machine does not count); inf when one run takes over the budget."""
        best = INF
        for _ in range(repeats):
            if self.armed:
                signal.setitimer(signal.ITIMER_REAL, self.seconds)
            start = time.thread_time()
            try:
                run(text)
            except _OverBudget:
                return INF
            finally:
                if self.armed:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            best = min(best, time.thread_time() - start)
        return best


def grows_superlinearly(run: Callable[[str], object], pump: Pump, size: int = SIZE,
                        budget: Budget | None = None) -> Slow | None:
    if budget is None:
        with Budget() as budget:
            return grows_superlinearly(run, pump, size, budget)
    large = budget.timed(run, pump.text(size * GROWTH), 1)
    if large < FLOOR:
        return None  # the common case: one run, well under a millisecond
    sizes = (size, size * GROWTH)
    if large == INF:
        return Slow(pump, sizes, (budget.timed(run, pump.text(size), 1), INF))
    times = (budget.timed(run, pump.text(size), 3), budget.timed(run, pump.text(size * GROWTH), 3))
    if times[1] == INF:
        return Slow(pump, sizes, times)
    if times[1] < FLOOR or times[1] < RATIO * times[0]:
        return None
    # Confirm at the next size, so that one preempted run cannot flag a pattern.
    larger = budget.timed(run, pump.text(size * GROWTH * GROWTH), 2)
    if larger < RATIO * times[1]:
        return None
    return Slow(pump, sizes + (size * GROWTH * GROWTH,), times + (larger,))


def superlinear(run: Callable[[str], object], pattern_pumps: list[Pump], size: int = SIZE) -> Slow | None:
    """The first pump on which `run` grows super-linearly, or None."""
    with Budget() as budget:
        for pump in pattern_pumps:
            slow = grows_superlinearly(run, pump, size, budget)
            if slow is not None:
                return slow
    return None


def check(pattern: str, flags: int = 0, mode: str = "search", compiled=None, size: int = SIZE) -> Slow | None:
    """Pump test of one pattern: `mode` is how the caller runs it (search, match, fullmatch,
    finditer, findall, sub); `compiled` the object it runs (default: `re.compile`)."""
    compiled = compiled if compiled is not None else re.compile(pattern, flags)
    if mode == "finditer":
        def run(text): return sum(1 for _ in compiled.finditer(text))
    elif mode == "sub":
        def run(text): return compiled.sub("", text)
    else:
        run = getattr(compiled, mode)
    return superlinear(run, pumps(pattern, flags), size)
