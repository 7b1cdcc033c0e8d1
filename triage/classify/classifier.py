"""The classify pipeline: text -> incident -> ranked hypotheses -> report."""

from __future__ import annotations

from triage.classify.bare import bare_hypotheses
from triage.classify.commands import guess_checkpoint
from triage.kb import RuleSet, load_rules
from triage.kb.api_history import api_history
from triage.classify.match import rank
from triage.classify.partial import relaxed, site_hypotheses
from triage.logs.parse import parse
from triage.classify.report import Report


def classify(text: str, *, rules: RuleSet | None = None, truncated: bool = False,
             decode_errors: int = 0, facts: dict | None = None, cuts: tuple = ()) -> Report:
    """`cuts`: where a big log's middle was left out (LogText.cuts), for its lines' numbers."""
    rules = rules or load_rules()
    incident, lines = parse(text, truncated=truncated, decode_errors=decode_errors, cuts=cuts)
    sites = rules.sites

    def extend(view, scored):
        if sites:
            site_hypotheses(view, sites, rules.rules, scored)
        bare_hypotheses(view, rules.rules, rules.bare_reports, scored)

    hypotheses = rank(incident, lines, rules.rules, relax=relaxed, extend=extend)
    known = guess_checkpoint(incident.paths)
    known.update({k: v for k, v in (facts or {}).items() if v})
    return Report(incident, hypotheses, known, api_history(incident.primary, incident.versions))
