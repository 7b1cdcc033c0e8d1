"""Score classifications against the corpus labels: a pure function of outcomes.

`evaluate(outcomes)` takes one `Outcome` per classified log (the manifest case and what
the classifier ranked) and returns an `Evaluation` whose `to_json()` is the stable object
of `ds-triage eval --json` (docs/schemas/eval.schema.json). Nothing here reads files or
classifies; `triage.eval.corpus` does that.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from triage.eval.ambiguity import same_log_groups, unreachable
from triage.eval.releases import ReleaseTally, by_framework, by_release, direct_newest

SCHEMA_VERSION = 1
KINDS = ("failure", "silent", "negative", "clean")
LABELLED = ("failure", "silent")  # kinds whose expected_category is scored
TOP1_GATE = 0.95
UNKNOWN = "unknown"  # the category of "no checkpoint-loading failure"


@dataclass(frozen=True)
class Case:
    id: str
    log: str  # path under the corpus dir, as the manifest gives it
    kind: str
    expected_category: str | None = None
    expected_rule: str | None = None
    url: str | None = None  # the public thread a field-set case was written from
    release: str | None = None  # the DeepSpeed / torch pair the case ran (triage.eval.releases.release_of)
    framework: str | None = None  # what called DeepSpeed, if not the case's own code (releases.framework_of)


@dataclass(frozen=True)
class Guess:
    rule_id: str
    category: str
    confidence: float

    def to_json(self) -> dict:
        return {"rule_id": self.rule_id, "category": self.category, "confidence": round(self.confidence, 3)}


@dataclass(frozen=True)
class Outcome:
    case: Case
    guesses: tuple[Guess, ...]  # ranked, best first; empty when no rule fired
    seconds: float = 0.0  # time spent in classify()
    lines: int = 0  # lines in the log
    fingerprint: tuple[str, ...] = ()  # triage.eval.ambiguity.fingerprint of the log; () when not taken

    @property
    def category(self) -> str:
        return self.guesses[0].category if self.guesses else UNKNOWN

    @property
    def rule_id(self) -> str | None:
        return self.guesses[0].rule_id if self.guesses else None

    @property
    def top3_categories(self) -> list[str]:
        return [g.category for g in self.guesses[:3]] or [UNKNOWN]

    @property
    def is_checkpoint_failure(self) -> bool:
        return self.category != UNKNOWN


def outcome_from_report(case: Case, report, seconds: float = 0.0, lines: int = 0,
                        fingerprint: tuple[str, ...] = ()) -> Outcome:
    guesses = tuple(Guess(h.rule.id, h.rule.category, h.confidence) for h in report.hypotheses)
    return Outcome(case, guesses, seconds, lines, fingerprint)


def rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


@dataclass
class Tally:
    cases: int = 0
    top1: int = 0
    top3: int = 0
    unknown: int = 0  # classified as no checkpoint-loading failure at all

    def add(self, outcome: Outcome) -> None:
        expected = outcome.case.expected_category
        self.cases += 1
        self.top1 += outcome.category == expected
        self.top3 += expected in outcome.top3_categories
        self.unknown += not outcome.is_checkpoint_failure

    def to_json(self) -> dict:
        return {"cases": self.cases, "top1": self.top1, "top3": self.top3,
                "top1_rate": rate(self.top1, self.cases), "top3_rate": rate(self.top3, self.cases),
                "unknown": self.unknown}


@dataclass
class Gate:
    name: str
    passed: bool
    detail: str

    def to_json(self) -> dict:
        return {"name": self.name, "passed": self.passed, "detail": self.detail}


@dataclass
class Evaluation:
    counts: dict[str, int]
    overall: Tally
    by_category: dict[str, Tally]
    confusion: dict[str, dict[str, int]]
    misclassified: list[Outcome]
    negatives: list[Outcome]
    negatives_diagnosed: list[Outcome]
    clean: list[Outcome]
    clean_fired: list[Outcome]
    rule_cases: list[Outcome]
    rule_wrong: list[Outcome]
    timed: list[Outcome]
    same_log: list[list[tuple[str, str]]] = field(default_factory=list)  # (id, category) groups, one text
    gates: list[Gate] = field(default_factory=list)
    top1_gate: float = TOP1_GATE
    top3_gate: float | None = None  # the field set's top-3 goal; None: not gated
    by_release: dict[str, ReleaseTally] = field(default_factory=dict)
    by_framework: dict[str, ReleaseTally] = field(default_factory=dict)
    direct_newest: tuple[str, ReleaseTally] | None = None  # (release label, tally): the rows' yardstick

    @property
    def top1_ceiling(self) -> int:
        """Labelled cases a log-only classifier can get right at best (eval_ambiguity)."""
        return self.overall.cases - unreachable(self.same_log)

    @property
    def passed(self) -> bool:
        return all(g.passed for g in self.gates)

    @property
    def clean_lines(self) -> int:
        return sum(o.lines for o in self.clean)

    @property
    def clean_firings(self) -> int:
        return sum(len(o.guesses) for o in self.clean)

    @property
    def clean_fp_per_million(self) -> float | None:
        lines = self.clean_lines
        return round(self.clean_firings * 1_000_000 / lines, 2) if lines else None

    @property
    def median_ms(self) -> float | None:
        return round(statistics.median(o.seconds for o in self.timed) * 1000, 2) if self.timed else None

    @property
    def worst(self) -> Outcome | None:
        # ties go to the first case in manifest order, so the choice is stable
        return max(self.timed, key=lambda o: o.seconds, default=None)

    def to_json(self, corpus: str | None = None, rule_set: dict | None = None, set_name: str = "corpus") -> dict:
        """The stable object of `ds-triage eval --json`; `corpus`, `set_name` and `rule_set` say what was measured."""
        worst = self.worst
        gates = {"passed": self.passed, "top1_min": self.top1_gate, "checks": [g.to_json() for g in self.gates]}
        if self.top3_gate is not None:
            gates["top3_min"] = self.top3_gate
        return {
            "schema_version": SCHEMA_VERSION,
            "set": set_name,
            "corpus": corpus,
            "rule_set": rule_set,
            "cases": dict(self.counts),
            "accuracy": {
                **self.overall.to_json(),
                "by_category": {c: t.to_json() for c, t in sorted(self.by_category.items())},
                "by_release": {r: t.to_json() for r, t in self.by_release.items()},
                "by_framework": {f: t.to_json() for f, t in self.by_framework.items()},
                "direct_newest": {"release": self.direct_newest[0], **self.direct_newest[1].to_json()}
                if self.direct_newest else None,
            },
            "confusion": {e: dict(sorted(row.items())) for e, row in sorted(self.confusion.items())},
            "negatives": {
                "cases": len(self.negatives),
                "diagnosed": len(self.negatives_diagnosed),
                "false_positive_rate": rate(len(self.negatives_diagnosed), len(self.negatives)),
                "diagnosed_cases": [_case_json(o) for o in self.negatives_diagnosed],
            },
            "clean": {
                "cases": len(self.clean),
                "lines": self.clean_lines,
                "fired": len(self.clean_fired),
                "firings": self.clean_firings,
                "false_positives_per_million_lines": self.clean_fp_per_million,
                "fired_cases": [_case_json(o) for o in self.clean_fired],
            },
            "rule_accuracy": {
                "cases": len(self.rule_cases),
                "top1": len(self.rule_cases) - len(self.rule_wrong),
                "top1_rate": rate(len(self.rule_cases) - len(self.rule_wrong), len(self.rule_cases)),
                "wrong": [{**_case_json(o), "expected_rule": o.case.expected_rule} for o in self.rule_wrong],
            },
            "misclassified": [{**_case_json(o), "expected": o.case.expected_category} for o in self.misclassified],
            "same_log": {
                "groups": [[{"id": i, "expected": c} for i, c in group] for group in self.same_log],
                "top1_ceiling": self.top1_ceiling,
                "top1_ceiling_rate": rate(self.top1_ceiling, self.overall.cases),
            },
            "timing": {
                "logs": len(self.timed),
                "median_ms": self.median_ms,
                "worst_ms": round(worst.seconds * 1000, 2) if worst else None,
                "worst_log": worst.case.log if worst else None,
            },
            "gates": gates,
        }


def _case_json(outcome: Outcome) -> dict:
    data = {"id": outcome.case.id, "log": outcome.case.log, "kind": outcome.case.kind,
            "got": [g.to_json() for g in outcome.guesses[:3]]}
    if outcome.case.url:
        data["url"] = outcome.case.url
    return data


def evaluate(outcomes: list[Outcome], top1_gate: float = TOP1_GATE, top3_gate: float | None = None) -> Evaluation:
    counts = {kind: 0 for kind in KINDS}
    overall = Tally()
    by_category: dict[str, Tally] = {}
    confusion: dict[str, dict[str, int]] = {}
    misclassified, negatives, diagnosed, clean, fired, rule_cases, rule_wrong = [], [], [], [], [], [], []
    for outcome in outcomes:
        case = outcome.case
        counts[case.kind] = counts.get(case.kind, 0) + 1
        if case.kind in LABELLED:
            overall.add(outcome)
            by_category.setdefault(case.expected_category, Tally()).add(outcome)
            row = confusion.setdefault(case.expected_category, {})
            row[outcome.category] = row.get(outcome.category, 0) + 1
            if outcome.category != case.expected_category:
                misclassified.append(outcome)
        elif case.kind == "negative":
            negatives.append(outcome)
            if outcome.is_checkpoint_failure:
                diagnosed.append(outcome)
        elif case.kind == "clean":
            clean.append(outcome)
            if outcome.guesses:
                fired.append(outcome)
        if case.expected_rule:
            rule_cases.append(outcome)
            if outcome.rule_id != case.expected_rule:
                rule_wrong.append(outcome)
    counts["total"] = len(outcomes)
    printed = [(o.case.id, o.case.expected_category, o.fingerprint) for o in outcomes
               if o.case.kind in LABELLED and o.fingerprint]
    result = Evaluation(counts, overall, by_category, confusion, misclassified, negatives, diagnosed,
                        clean, fired, rule_cases, rule_wrong, list(outcomes), same_log_groups(printed),
                        top1_gate=top1_gate, top3_gate=top3_gate, by_release=by_release(outcomes, Tally),
                        by_framework=by_framework(outcomes, Tally), direct_newest=direct_newest(outcomes, Tally))
    result.gates = gates(result, top1_gate, top3_gate)
    return result


def gates(result: Evaluation, top1_gate: float = TOP1_GATE, top3_gate: float | None = None) -> list[Gate]:
    top1 = rate(result.overall.top1, result.overall.cases)
    if top1 is None:
        top1_gate_result = Gate("top1", False, "no failure or silent case to measure top-1 accuracy on")
    else:
        ok = top1 >= top1_gate
        top1_gate_result = Gate("top1", ok, f"top-1 {top1:.3f} {'>=' if ok else '<'} {top1_gate}")
    n, d = len(result.negatives), len(result.negatives_diagnosed)
    c, f = len(result.clean), len(result.clean_fired)
    top3_gate_result = []
    if top3_gate is not None:
        top3 = rate(result.overall.top3, result.overall.cases)
        ok = top3 is not None and top3 >= top3_gate
        detail = (f"top-3 {top3:.3f} {'>=' if ok else '<'} {top3_gate}" if top3 is not None
                  else "no failure or silent case to measure top-3 accuracy on")
        top3_gate_result = [Gate("top3", ok, detail)]
    return [
        top1_gate_result,
        *top3_gate_result,
        Gate("negatives", d == 0, f"{d} of {n} negative logs diagnosed as a checkpoint failure"),
        Gate("clean", f == 0, f"{f} of {c} clean logs fired a rule"),
    ]
