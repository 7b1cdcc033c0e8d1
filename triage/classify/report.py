"""The classification result and its stable JSON form (docs/schemas/)."""

from __future__ import annotations

from triage.classify.commands import render
from triage.kb.verify_steps import ordered, runs_code
from triage.logs.incident import Incident
from triage.classify.match import Hypothesis
from triage.record import Record
from triage.runbook.links import runbook_url

SCHEMA_VERSION = 1

# The order in which a person should verify: cheap, certain checks first.
PHASES = ("path", "permission", "integrity", "version", "config", "memory", "other")
CATEGORY_PHASE = {
    "missing_file": "path",
    "partial_checkpoint": "path",
    "permission_denied": "permission",
    "corrupt_file": "integrity",
    "unsafe_load_blocked": "integrity",
    "version_incompatible": "version",
    "known_bug": "version",
    "zero_stage_mismatch": "config",
    "parallelism_mismatch": "config",
    "config_mismatch": "config",
    "model_mismatch": "config",
    "optimizer_mismatch": "config",
    "out_of_memory": "memory",
    "unknown": "other",
}


class Report(Record):
    _fields = ("incident", "hypotheses", "facts", "api_history")

    def __init__(self, incident: Incident, hypotheses: list[Hypothesis], facts: dict,
                 api_history: list[dict] | None = None):
        self.incident, self.hypotheses, self.facts = incident, hypotheses, facts
        # Which DeepSpeed releases define the name or keyword the error misses (kb/api_history).
        self.api_history = [] if api_history is None else api_history

    @property
    def top(self) -> Hypothesis | None:
        return self.hypotheses[0] if self.hypotheses else None

    @property
    def category(self) -> str:
        return self.top.rule.category if self.top else "unknown"

    @property
    def is_checkpoint_failure(self) -> bool:
        return self.category != "unknown"

    def verify_steps(self, hypothesis: Hypothesis) -> list[dict]:
        return [
            {"command": render(step["command"], self.facts), "shows": step["shows"],
             "runs_checkpoint_code": runs_code(step)}
            for step in ordered(hypothesis.rule.data["verify"])
        ]

    def in_verification_order(self) -> list[Hypothesis]:
        return sorted(self.hypotheses, key=lambda h: PHASES.index(CATEGORY_PHASE[h.rule.category]))

    def to_json(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "category": self.category,
            "incident": self.incident.to_json(),
            "checkpoint": {"path": self.facts.get("ckpt"), "tag": self.facts.get("tag")},
            "hypotheses": [self._hypothesis_json(h) for h in self.hypotheses],
            "api_history": self.api_history,
        }

    def _hypothesis_json(self, h: Hypothesis) -> dict:
        data = h.rule.data
        return {
            "rule_id": h.rule.id,
            "category": h.rule.category,
            "runbook_url": runbook_url(h.rule.id),
            "title": h.rule.title,
            "summary": data["summary"],
            "confidence": round(h.confidence, 3),
            "phase": CATEGORY_PHASE[h.rule.category],
            "evidence": [e.to_json() for e in h.evidence],
            "verify": self.verify_steps(h),
            "probes": list(data.get("probes", [])),
            "repairs": list(data.get("repairs", [])),
            "fix": [dict(step) for step in data["fix"]],
        }
