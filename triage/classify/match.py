"""Score every rule against an incident; return ranked hypotheses.

A rule fires when one of its patterns holds (structured and regex
conditions), or, weaker, when its fuzzy phrases match error lines closely.
Boosts raise a fired rule's confidence; `unless` conditions rule it out.
"""

from __future__ import annotations

import bisect
import re
from itertools import accumulate
from collections.abc import Callable

from triage.logs.incident import Incident, RaisedException
from triage.classify.ceiling import ceiling
from triage.kb.literal_scan import presence
from triage.kb.model import Conditions, Rule
from triage.kb.regex import known_literals
from triage.logs.normalize import Line
from triage.logs.runs import failing_run_start
from triage.record import Record

MIN_CONFIDENCE = 0.35
MAX_HYPOTHESES = 5
MAX_FUZZY_CANDIDATES = 400
MAX_ERRORISH_LINES = 2000
ERRORISH_SLICE = 1 << 20  # characters of the log lower-cased at a time (whole lines)
# Exceptions the rules read: the first printed, the last and the primary one. A real log raises
# a few distinct ones (3 at most in the corpus, ranks collapsed); a log of 16,000 distinct
# `KeyError` lines would cost every pattern 16,000 tries (56 s), and a rule needs one of them.
HEAD_EXCEPTIONS = 150
TAIL_EXCEPTIONS = 50
# A hypothesis resting only on a rank's failure printed after another rank's: the cause to fix second
LATER_FAILURE_DISCOUNT = 0.8
# Lines worth fuzzy-matching: the rest of a 5,000-line log is chatter.
# Lower-case words searched in the lower-cased log, each with str.find (errorish_lines):
# three times faster than the one alternation below over a 5,000-line log.
_ERRORISH_WORDS = ("error", "exception", "assert", "fail", "cannot", "can't", "could not", "unable", "missing",
                   "not found", "no such", "denied", "mismatch", "invalid", "corrupt", "killed", "unexpected")
# The same words as one regex, for a caller that wants the match objects.
_ERRORISH = re.compile("|".join(_ERRORISH_WORDS))


class Evidence(Record):
    _fields = ("line", "text", "why")

    def __init__(self, line: int | None, text: str, why: str):
        self.line, self.text, self.why = line, text, why

    def to_json(self) -> dict:
        return {"line": self.line, "text": self.text, "why": self.why}


class Hypothesis(Record):
    _fields = ("rule", "confidence", "evidence", "specificity")

    def __init__(self, rule: Rule, confidence: float, evidence: list[Evidence] | None = None, specificity: int = 0):
        self.rule, self.confidence = rule, confidence
        self.evidence = [] if evidence is None else evidence
        self.specificity = specificity

    def sort_key(self):
        return (-round(self.confidence, 3), -self.rule.priority, -self.specificity, self.rule.id)


class LogView:
    """The normalized log joined once, so a line regex is one C-level search."""

    def __init__(self, incident: Incident, lines: list[Line]):
        self.incident = incident
        self.lines = lines
        texts = [line.text for line in lines]
        self.text = "\n".join(texts)
        # each line's offset in text: the running sum of the lengths before it, newlines included
        self.starts: list[int] = list(accumulate([len(text) + 1 for text in texts], initial=0))[:-1]
        self.exceptions: list[RaisedException] = read_exceptions(incident)
        self.has_traceback = any(not chain.bare for chain in incident.chains)
        self._raised_as: dict[tuple[str, str], bool] = {}  # (exception regex, type) -> whether it matches
        self._said: dict[int, dict[str, bool]] = {}  # id(exception) -> the rule literals its message holds
        self.chain_ranks = {id(e): chain.ranks for chain in incident.chains for e in chain.exceptions}
        self._fuzzy: list[tuple[int | None, str]] | None = None
        self._errorish: list[int] | None = None
        self.site_blocks = None  # triage.classify.messages.blocks, once
        self.cut_exceptions = None  # triage.classify.partial.relaxed: the exceptions cut from a paste, once
        self._run_start: int | None = None
        self._signals: list | None = None  # what the error content says (triage.analysis.facts), once asked
        # which rule literals text holds (Regex.search): one scan for all, or each tested once
        self._present: dict[str, bool] = presence(self.text, known_literals())

    def raised_as(self, regex, exc: RaisedException) -> bool:
        """Whether a pattern's `exception` regex names the exception's type (dotted or short): once
        per type, however many exceptions of that type the log raised."""
        key = (regex.pattern, exc.type)
        found = self._raised_as.get(key)
        if found is None:
            found = self._raised_as[key] = bool(regex.fullmatch(exc.type) or regex.fullmatch(exc.short_type))
        return found

    def says(self, regex, exc: RaisedException):
        """regex.search(exc.message), each rule literal looked for in the message once, however
        many patterns need it: a message of megabytes is read a few times, not once a pattern."""
        return regex.search(exc.message, present=self._said.setdefault(id(exc), {}))

    def line_text(self, no: int | None) -> str:
        """The normalized text of the line numbered `no` in the original log."""
        # normalize() keeps every line of the text: line `no` is lines[no - 1], unless a big log's
        # middle was left out (the numbers jump there: found by bisection)
        if no is None or not self.lines:
            return ""
        if self.lines[-1].no != len(self.lines):
            index = bisect.bisect_left(self._numbers(), no)
            return self.lines[index].text if index < len(self.lines) and self.lines[index].no == no else ""
        return self.lines[no - 1].text if 0 < no <= len(self.lines) else ""

    def _numbers(self) -> list[int]:
        if getattr(self, "_line_numbers", None) is None:
            self._line_numbers = [line.no for line in self.lines]
        return self._line_numbers

    def facts(self, wanted) -> list[Evidence] | None:
        """Evidence that each (fact, qualifier) holds of the log's error content, or None. The
        analysis runs once per log, and only for a rule that asks."""
        from triage.analysis.facts import holds as holds_fact, of_incident, source as fact_source

        if self._signals is None:
            self._signals = of_incident(self.incident)
        evidence = []
        for name, qualifier in wanted:
            signal = holds_fact(self._signals, name, qualifier)
            if signal is None:
                return None
            at, exc = fact_source(signal, self.text, self.exceptions)
            line = self.lines[bisect.bisect_right(self.starts, at) - 1].no if at is not None else \
                exc.log_line if exc is not None else None
            shown = f"{exc.type}: {exc.message}" if exc is not None and line is None else self.line_text(line)
            evidence.append(Evidence(line, shown.strip()[:300], f"{signal.name}: {signal.says}"))
        return evidence

    def find_line(self, pattern, run_only: bool = False) -> Line | None:
        match = pattern.search(self.text, self.run_start if run_only else 0, present=self._present)
        if match is None:
            return None
        index = bisect.bisect_right(self.starts, match.start()) - 1
        return self.lines[index]

    @property
    def run_start(self) -> int:
        """Offset in text where the run that failed starts (triage.logs.runs), before the first exception."""
        if self._run_start is None:
            first = min((e.log_line for e in self.exceptions if e.log_line), default=None)
            numbers = [line.no for line in self.lines]
            index = bisect.bisect_left(numbers, first) if first else len(numbers)
            end = self.starts[index] if index < len(self.starts) else len(self.text)
            self._run_start = failing_run_start(self.text, end)
        return self._run_start

    def errorish_lines(self) -> list[int]:
        """Indexes into `lines` of the lines with an error-ish word, in order, once each."""
        if self._errorish is None:
            # A case-insensitive scan of the joined log, a slice of whole lines at a time: lower()
            # of a 32 MiB text that holds one emoji takes 4 bytes a character and 3 times that
            # while it works (500 MB), a slice costs a few MB.
            hits: set[int] = set()
            starts = self.starts
            first = 0
            while first < len(starts):
                last = bisect.bisect_right(starts, starts[first] + ERRORISH_SLICE, first + 1)
                end = starts[last] if last < len(starts) else len(self.text)
                _errorish_in(self.text[starts[first]:end], starts, first, hits)
                first = last
            self._errorish = sorted(hits)[:MAX_ERRORISH_LINES]
        return self._errorish

    def fuzzy_candidates(self) -> list[tuple[int | None, str]]:
        if self._fuzzy is None:
            seen: set[str] = set()
            out: list[tuple[int | None, str]] = []
            for exc in self.exceptions:
                text = f"{exc.type}: {exc.message}"[:600]
                if text not in seen:
                    seen.add(text)
                    out.append((exc.log_line, text))
            for index in self.errorish_lines():
                if len(out) >= MAX_FUZZY_CANDIDATES:
                    break
                line = self.lines[index]
                text = line.text.strip()
                if 12 <= len(text) <= 600 and text not in seen:
                    seen.add(text)
                    out.append((line.no, text))
            self._fuzzy = out
        return self._fuzzy


def _errorish_in(text: str, starts: list[int], first: int, hits: set[int]) -> None:
    """Add to `hits` the index of each line of `text` (lines from index `first` on) with an error-ish word."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a few Unicode letters lower-case to two
        lowered = "".join(c.lower() if len(c.lower()) == 1 else c for c in text)
    base = starts[first]
    # Each word found by str.find (a memchr-backed scan per word) instead of one
    # alternation tried at every offset: the same lines, as no word spans a newline.
    for word in _ERRORISH_WORDS:
        find = lowered.find
        at = find(word)
        while at != -1:
            index = bisect.bisect_right(starts, base + at) - 1
            hits.add(index)
            # the rest of this line holds nothing new for this word
            at = find(word, starts[index + 1] - base) if index + 1 < len(starts) else -1


def read_exceptions(incident: Incident) -> list[RaisedException]:
    """The exceptions of every chain, in order; of more than HEAD_EXCEPTIONS + TAIL_EXCEPTIONS, the
    first and last ones printed and the primary one's chain."""
    raised = [e for chain in incident.chains for e in chain.exceptions]
    if len(raised) <= HEAD_EXCEPTIONS + TAIL_EXCEPTIONS:
        return raised
    primary = incident.primary
    chain = next(c for c in incident.chains if c.final is primary)
    middle = {id(e) for e in chain.exceptions}
    return raised[:HEAD_EXCEPTIONS] + [e for e in raised[HEAD_EXCEPTIONS:-TAIL_EXCEPTIONS] if id(e) in middle] \
        + raised[-TAIL_EXCEPTIONS:]


def rank(incident: Incident, lines: list[Line], rules: list[Rule], *,
         relax: Callable[[Rule, LogView], Hypothesis | None] | None = None,
         extend: Callable[[LogView, dict[str, Hypothesis]], None] | None = None) -> list[Hypothesis]:
    """Every rule scored. `relax(rule, view)` scores a rule none of whose patterns hold and that
    no `unless` rules out (triage.classify.partial.relaxed: a paste's cut exception); `extend(view,
    scored)` adds or raises hypotheses by rule id (partial.site_hypotheses: the message index)."""
    view = LogView(incident, lines)
    scored = {rule.id: h for rule in rules if (h := score(rule, view, relax)) is not None}
    if extend is not None:
        extend(view, scored)
    _discount_later_failures(scored.values(), view)
    hypotheses = [h for h in scored.values() if h.confidence >= MIN_CONFIDENCE]
    hypotheses.sort(key=Hypothesis.sort_key)
    return hypotheses[:MAX_HYPOTHESES]


def _discount_later_failures(hypotheses, view: LogView) -> None:
    """Lower the hypotheses that explain only another rank's later failure, when some hypothesis
    explains the primary one: what failed first is what to fix first; the other stays listed."""
    raised, secondary = _failure_lines(view)
    if not secondary:
        return
    cited = {id(h): {e.line for e in h.evidence if e.line in raised} for h in hypotheses}
    if not any(cited[id(h)] - secondary for h in hypotheses if h.confidence >= MIN_CONFIDENCE):
        return
    for h in hypotheses:
        if cited[id(h)] and cited[id(h)] <= secondary:
            h.confidence *= LATER_FAILURE_DISCOUNT
            h.evidence.append(Evidence(None, "", "explains only another rank's failure, printed after the first one"))


def _failure_lines(view: LogView) -> tuple[set[int], set[int]]:
    """The log lines of every raised exception, and of those raised only on ranks other
    than the primary failure's.

    When ranks fail differently (rank 1 misses its shard, rank 0 then trips on something
    else), the primary failure (Incident.primary: the first printed) is the one to explain first."""
    raised = {e.log_line for e in view.exceptions if e.log_line is not None}
    primary = view.incident.primary
    chain = next((c for c in view.incident.chains if primary is not None and c.final is primary), None)
    if chain is None or not chain.ranks:
        return raised, set()
    mine = set(chain.ranks)
    return raised, {e.log_line for c in view.incident.chains if c.ranks and not mine & set(c.ranks)
                    for e in c.exceptions if e.log_line is not None}


def score(rule: Rule, view: LogView, relax=None) -> Hypothesis | None:
    # An `unless` over facts is asked only of a rule that fired: most logs never need the analysis.
    if any(holds(cond, view) is not None for cond in rule.unless if not cond.facts):
        return None
    best: Hypothesis | None = None
    for pattern in rule.patterns:
        evidence = holds(pattern.conditions, view)
        if evidence is None:
            continue
        if best is None or pattern.confidence > best.confidence:
            if pattern.name:
                evidence = [Evidence(e.line, e.text, f"{pattern.name}: {e.why}") for e in evidence]
            best = Hypothesis(rule, pattern.confidence, evidence, pattern.conditions.specificity)
    for phrase, similarity, line_no, text in _phrase_hits(rule, view):
        strength = phrase.weight * similarity / 100
        why = f"resembles {phrase.text!r} ({similarity:.0f}% similar)"
        if best is None or (best.specificity == 0 and strength > best.confidence):
            best = Hypothesis(rule, strength, [Evidence(line_no, text, why)], 0)
        elif not any(e.line == line_no for e in best.evidence):
            best.confidence += (1 - best.confidence) * strength * 0.5
            best.evidence.append(Evidence(line_no, text, why))
    if best is None and relax is not None:
        best = relax(rule, view)
    if best is None or any(holds(cond, view) is not None for cond in rule.unless if cond.facts):
        return None
    return boosted(best, view)


def boosted(best: Hypothesis, view: LogView) -> Hypothesis:
    for boost in best.rule.boosts:
        evidence = holds(boost.conditions, view)
        if evidence is not None:
            best.confidence += (1 - best.confidence) * boost.weight
            why = boost.why or "supporting evidence"
            best.evidence.extend(Evidence(e.line, e.text, f"{why}: {e.why}") for e in evidence)
    best.confidence = min(1.0, best.confidence)
    return best


def _phrase_hits(rule: Rule, view: LogView):
    if not rule.phrases:
        return
    candidates = view.fuzzy_candidates()
    for phrase in rule.phrases:
        # only the lines that may reach the cutoff (the best of them is the best of all that do)
        near = [line for line in candidates if ceiling(phrase.text, line[1]) >= phrase.min_similarity]
        if not near:
            continue
        from rapidfuzz import fuzz, process  # C extension; imported only when a line may match a phrase

        found = process.extractOne(phrase.text, [text for _, text in near], scorer=fuzz.partial_ratio,
                                   score_cutoff=phrase.min_similarity)
        if found:
            _, similarity, index = found
            yield phrase, similarity, near[index][0], near[index][1]


def holds(cond: Conditions, view: LogView) -> list[Evidence] | None:
    """Evidence that every condition holds, or None."""
    evidence: list[Evidence] = []
    if cond.no_traceback is not None:
        if cond.no_traceback != (not view.has_traceback):
            return None
        evidence.append(Evidence(None, "", "no Python traceback in the log" if cond.no_traceback else "a traceback is present"))
    if cond.exit_code is not None:
        ranks = [r for r, code in view.incident.exit_codes.items() if code == cond.exit_code]
        if not ranks:
            return None
        who = "the launcher" if ranks == [-1] else f"rank {', '.join(str(r) for r in ranks if r >= 0)}"
        evidence.append(Evidence(None, f"exit code {cond.exit_code}", f"{who} exited with code {cond.exit_code}"))
    # The exception check first: it reads a few parsed exceptions, while a line
    # condition searches the whole log, so most patterns stop before the search.
    found: list[Evidence] = []
    if cond.exception_scoped:
        found = _exception_evidence(cond, view)
        if found is None:
            return None
    for regex, run_only in ((cond.line, False), (cond.run_line, True)):
        if regex is not None:
            line = view.find_line(regex, run_only)
            if line is None:
                return None
            where = "line of the failing run" if run_only else "line"
            evidence.append(Evidence(line.no, line.text.strip()[:300], f"{where} matches /{regex.pattern}/"))
    evidence.extend(found)
    if cond.facts:  # last: what the error says is read only for a text the other conditions let through
        said = view.facts(cond.facts)
        if said is None:
            return None
        evidence.extend(said)
    return evidence


def _raised(cond: Conditions, exc: RaisedException, view: LogView) -> list[Evidence] | None:
    """Evidence that this one exception satisfies the exception-scoped conditions."""
    if cond.exception and not view.raised_as(cond.exception, exc):
        return None
    if cond.message and not view.says(cond.message, exc):
        return None
    frame_evidence = []
    for spec in cond.frames:
        frame = next((f for f in exc.frames if frame_matches(spec, f)), None)
        if frame is None:
            return None
        frame_evidence.append(Evidence(frame.log_line, f'File "{frame.file}", line {frame.line}, in {frame.function}',
                                       f"traceback passes through {spec.describe()}"))
    head = f"{exc.type}: {exc.message.splitlines()[0]}" if exc.message else exc.type
    reasons = []
    if cond.exception:
        reasons.append(f"exception {exc.short_type}")
    if cond.message:
        reasons.append(f"message matches /{cond.message.pattern}/")
    return [Evidence(exc.log_line, head[:300], " and ".join(reasons) or "raised here")] + frame_evidence


def _exception_evidence(cond: Conditions, view: LogView) -> list[Evidence] | None:
    if cond.ranks is None:
        return next((found for exc in view.exceptions if (found := _raised(cond, exc, view)) is not None), None)
    # Which ranks raised it, against every rank the log shows: one rank's bad
    # shard fails that rank alone; a setting every rank shares fails them all.
    first, raising = None, set()
    for exc in view.exceptions:
        found = _raised(cond, exc, view)
        if found is not None:
            first = first or found
            raising |= set(view.chain_ranks[id(exc)])
    if first is None:
        return None
    world = set(view.incident.ranks)
    if cond.ranks == "some":
        ok = len(world) > 1 and bool(raising) and raising < world
    else:
        # One rank alone is all of them only when it is rank 0 (or untagged): a log that shows
        # rank 1 alone is a paste of part of a job whose rank 0 is not in it.
        ok = raising >= world if len(world) > 1 else not (world - {0})
    if not ok:
        return None
    shown = ", ".join(map(str, sorted(raising))) or "?"
    return first + [Evidence(None, f"ranks {shown} of {len(world) or 1}",
                             f"raised on {cond.ranks} of the ranks in the log")]


def frame_matches(spec, frame) -> bool:
    if spec.file and not (frame.file == spec.file or frame.file.endswith("/" + spec.file)):
        return False
    if spec.function and not spec.function.fullmatch(frame.function):
        return False
    if spec.code and not (frame.code and spec.code.search(frame.code)):
        return False
    return True
