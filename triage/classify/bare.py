"""A bare `AssertionError` pasted without its frames: every cause a bare assert on the load path has.

DeepSpeed asserts without a message in many places on the load path (docs/load-sites.md marks
them `(bare)`). Pasted alone, `AssertionError` names none of them, and a whole traceback is what
tells them apart: the frames say which assert, the lines before it say why. So such a paste gets
every rule with a pattern for a bare assertion, all at low confidence (below the message index's
WEAK, triage.classify.messages), never a confident single answer, each saying what to paste next.

Their order is how often users report each: first the rules of the sites public threads report
(`rules/bare-assert-reports.json`: the threads counted per site), then within a site the rule's
own pattern confidence, less for each condition the paste cannot show (as `partial.relaxed`).
"""

from __future__ import annotations

import json
from pathlib import Path

from triage.classify.match import MIN_CONFIDENCE, Evidence, Hypothesis, LogView, holds
from triage.classify.partial import UNSHOWN_CONDITION, unshown_conditions
from triage.kb.model import Rule

REPORTS_NAME = "bare-assert-reports.json"
BASE = 0.31  # every cause of a bare assertion: barely above MIN_CONFIDENCE
REPORTED = 0.05  # the share of the most reported site's threads a rule's site has, times this
PATTERN = 0.06  # the rule's own pattern confidence (less what the paste cannot show), times this


def load_reports(directory: str | Path) -> dict[str, int]:
    """Public threads counted per bare-assert site (`source function`), from the file beside the rules."""
    try:
        data = json.loads((Path(directory) / REPORTS_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {site: len(entry.get("threads", [])) for site, entry in data.get("sites", {}).items()}


def bare_assertion(view: LogView):
    """The paste's bare `AssertionError` cut from its traceback with no frame, or None."""
    for exc in view.exceptions:
        if exc.cut and not exc.frames and exc.short_type == "AssertionError" and not exc.message.strip():
            return exc
    return None


def bare_hypotheses(view: LogView, rules: list[Rule], reports: dict[str, int], scored: dict[str, Hypothesis]) -> None:
    """Where nothing else fired on a frameless bare assertion, add each rule that has a bare-assert pattern."""
    if any(h.confidence >= MIN_CONFIDENCE for h in scored.values()):
        return
    exc = bare_assertion(view)
    if exc is None:
        return
    most = max(reports.values(), default=0) or 1
    causes = []
    for rule in rules:
        found = _bare_pattern(rule, exc, view, reports)
        if found is not None and not any(holds(cond, view) is not None for cond in rule.unless):
            causes.append((rule, *found))
    for rule, value, site in causes:
        share = reports.get(site, 0) / most
        confidence = BASE + REPORTED * share + PATTERN * value
        reported = f"{reports[site]} public threads report it" if reports.get(site) else "no public report found"
        why = (f"a bare AssertionError without frames: one of {len(causes)} causes of a bare assert on the load "
               f"path ({site}: {reported}); paste the `File ...` lines above it and the log before it")
        scored[rule.id] = Hypothesis(rule, confidence, [Evidence(exc.log_line, exc.type, why)], 0)


def _bare_pattern(rule: Rule, exc, view: LogView, reports: dict[str, int]) -> tuple[float, str] | None:
    """(the best bare-assert pattern's confidence less what the paste cannot show, its site), or None."""
    best = None
    for pattern in rule.patterns:
        cond = pattern.conditions
        if cond.message is None or cond.exception is None or not cond.message.fullmatch(""):
            continue
        if not view.raised_as(cond.exception, exc):
            continue
        unshown = unshown_conditions(cond, exc, view)
        value = pattern.confidence - UNSHOWN_CONDITION * max(0, unshown - 1)
        site = _site(cond.frames, reports)
        if best is None or (reports.get(site, 0), value) > (reports.get(best[1], 0), best[0]):
            best = (value, site)
    return best


def _site(frames, reports: dict[str, int]) -> str:
    """The reported site (`source function`) a pattern's frame names, else what the frame names."""
    for site in reports:
        source, function = site.split(" ", 1)
        bare = function.rsplit(".", 1)[-1]
        for spec in frames:
            if spec.file and source.endswith("/" + spec.file) and (
                    spec.function is None or spec.function.fullmatch(bare) or spec.function.fullmatch(function)):
                return site
    return " ".join(part for spec in frames[:1] for part in (spec.file, spec.function and spec.function.pattern) if part) \
        or "a bare assert"
