r"""Hypotheses for text cut from a log: what a paste lacks, weighed instead of required.

Two ways in, both weaker than a rule's own patterns on a whole log:

- `relaxed`: a pattern whose exception and message hold on an exception cut from a paste (no
  `Traceback` header above it, or no frame under one), while frames or lines the pattern also
  needs are not in the paste, fires at RELAXED of its confidence, less for each further
  condition missing. Only a message regex with words of its own relaxes: a bare
  `AssertionError` (`'^$'`) or any KeyError's key (`^'\w+'$`) names no cause without its frames.
- `site_hypotheses`: the rules covering a catalogued raise site whose message the text holds
  (triage.classify.messages over the message index), so a known site is never `unknown`.
"""

from __future__ import annotations

import re

from triage.classify import messages
from triage.classify.match import MIN_CONFIDENCE, Evidence, Hypothesis, LogView, frame_matches, boosted, holds
from triage.kb.model import Rule

# A message regex relaxes only with this many letters of its own (`^'\w+'$`, any KeyError, has none).
MESSAGE_LETTERS = 12
_REGEX_SYNTAX = re.compile(r"\\[A-Za-z]|\[[^\]]{0,200}\]|\(\?[:!=<]{1,2}|\{\d{0,4},?\d{0,4}\}")
_said: dict[str, bool] = {}
RELAXED = 0.5  # share of its pattern's confidence a match keeps when the paste lacks frames or lines the pattern needs
UNSHOWN_CONDITION = 0.03  # less for each further condition the paste lacks
PASTE_LINES = 100  # a text this short with no exception may still be a reformatted paste


def relaxed(rule: Rule, view: LogView) -> Hypothesis | None:
    """A pattern whose exception and message hold on an exception cut from a paste, while the
    frames or lines it also needs are not in the paste: weaker, less for each such condition."""
    if view.cut_exceptions is None:
        view.cut_exceptions = [exc for exc in view.exceptions if exc.cut]
    cut = view.cut_exceptions
    if not cut:
        return None
    best: Hypothesis | None = None
    for pattern in rule.patterns:
        cond = pattern.conditions
        if cond.message is None or not _says_something(cond.message.pattern):
            continue  # a bare assertion or a KeyError's key names no cause alone
        for exc in cut:
            if cond.exception and not view.raised_as(cond.exception, exc):
                continue
            if not view.says(cond.message, exc):
                continue
            if cond.facts and view.facts(cond.facts) is None:
                continue  # what the error says is not what the pattern needs: no paste lacks that
            unshown = unshown_conditions(cond, exc, view)
            if not unshown:
                continue
            value = pattern.confidence * RELAXED - UNSHOWN_CONDITION * (unshown - 1)
            if best is None or value > best.confidence:
                head = f"{exc.type}: {exc.message.splitlines()[0]}" if exc.message else exc.type
                why = (f"{pattern.name + ': ' if pattern.name else ''}exception and message match /{cond.message.pattern}/; "
                       f"{unshown} more condition(s) of the pattern (frames, lines) are not in the paste")
                best = Hypothesis(rule, value, [Evidence(exc.log_line, head[:300], why)], 0)
    return best


def unshown_conditions(cond, exc, view: LogView) -> int:
    """How many of a pattern's conditions beyond exception and message the paste does not show."""
    unshown = sum(not any(frame_matches(spec, f) for f in exc.frames) for spec in cond.frames)
    unshown += sum(regex is not None and view.find_line(regex, run_only) is None
                   for regex, run_only in ((cond.line, False), (cond.run_line, True)))
    return unshown + sum(c is not None for c in (cond.exit_code, cond.ranks))


def _says_something(pattern: str) -> bool:
    """Whether a message regex holds words enough to name a failure without its frames."""
    if pattern not in _said:
        _said[pattern] = sum(c.isalpha() for c in _REGEX_SYNTAX.sub("", pattern)) >= MESSAGE_LETTERS
    return _said[pattern]


def site_hypotheses(view: LogView, sites, rules: list[Rule], scored: dict[str, Hypothesis]) -> None:
    """Add (or raise) the hypotheses of the rules covering each raise site whose message the log holds."""
    fired = {rule_id for rule_id, h in scored.items() if h.confidence >= MIN_CONFIDENCE}
    hits = messages.find_sites(view, sites)
    if not fired and (view.exceptions or len(view.lines) <= PASTE_LINES):
        # Reformatted text, only where no rule fired, and only in a failure or a paste: a long
        # log without an exception is a healthy run, and comparing its lines costs more.
        exact = {id(hit.site) for hit in hits}
        hits += [hit for hit in messages.find_sites_fuzzy(view, sites) if id(hit.site) not in exact]
    if not hits:
        return
    by_id = {rule.id: rule for rule in rules}
    for hit in hits:
        covering = [by_id[rule_id] for rule_id in hit.site.rules if rule_id in by_id]
        whole = hit.block.exc is not None and hit.framed and not hit.block.exc.cut
        if whole and any(rule.id in fired for rule in covering):
            continue  # a whole traceback, and the rules read it: those that did not fire stay out
        for rule in covering:
            value = messages.confidence(hit, _unshown(rule, hit, view))
            existing = scored.get(rule.id)
            if existing is not None and existing.confidence >= value:
                continue
            if any(holds(cond, view) is not None for cond in rule.unless):
                continue
            text = view.line_text(hit.line_no) if hit.block.exc is None else hit.block.raw.splitlines()[0]
            found = Hypothesis(rule, value, [Evidence(hit.line_no, text.strip()[:300], messages.describe(hit))], 0)
            scored[rule.id] = boosted(found, view)


def _unshown(rule: Rule, hit, view: LogView) -> int | None:
    """How many conditions the paste cannot show (frames, lines, ranks...) in the rule's pattern
    whose own message regex matches the text the site was found in, the fewest; None: none matches.
    A known exception type must match the pattern's too."""
    exc = hit.block.exc
    if exc is not None:
        texts = [exc.message]
    else:  # the lines it was found in; without a `Type:` before the message, for regexes anchored at ^
        raw = hit.block.raw[hit.block.raw.find(":") + 1:].lstrip() if hit.type_state != "absent" else hit.block.raw
        texts = [raw, raw.replace(" ", "")]
    best = None
    for pattern in rule.patterns:
        cond = pattern.conditions
        if cond.message is None or not any(cond.message.search(text) for text in texts):
            continue
        if exc is not None and cond.exception is not None and not view.raised_as(cond.exception, exc):
            continue
        if cond.facts and view.facts(cond.facts) is None:
            continue  # the text is the site's, what it says (a ratio, a placeholder) is not the pattern's
        unshown = len(cond.frames) + sum(c is not None for c in (cond.line, cond.run_line, cond.exit_code,
                                                                  cond.no_traceback, cond.ranks))
        best = unshown if best is None else min(best, unshown)
    return best
