"""Run each rule's own examples: positives must rank it first, negatives must
not fire it. `todo-` examples are known gaps, expected to fail (xfail)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from triage.kb.index import RuleSet


@dataclass(frozen=True)
class Example:
    rule_id: str
    index: int
    expect: str
    label: str
    text: str

    @property
    def todo(self) -> bool:
        return self.expect.startswith("todo-")


def iter_examples(rules: RuleSet) -> list[Example]:
    root = rules.directory.parent
    out = []
    for rule in rules.rules:
        for index, spec in enumerate(rule.data["examples"]):
            if "file" in spec:
                text = (root / spec["file"]).read_text(encoding="utf-8", errors="replace")
                label = spec["file"]
            else:
                text, label = spec["log"], f"inline #{index}"
            out.append(Example(rule.id, index, spec["expect"], label, text))
    return out


def example_failure(example: Example, rules: RuleSet) -> str | None:
    """Why the example does not behave as its `expect` says, or None."""
    from triage.classify.classifier import classify

    report = classify(example.text, rules=rules)
    ranked = [h.rule.id for h in report.hypotheses]
    wants_match = example.expect in ("match", "todo-match")
    if wants_match:
        if ranked[:1] != [example.rule_id]:
            return f"{example.rule_id} {example.label}: expected {example.rule_id} first, got {ranked or 'nothing'}"
    elif example.rule_id in ranked:
        return f"{example.rule_id} {example.label}: must not fire, but ranked #{ranked.index(example.rule_id) + 1} of {ranked}"
    return None


def check_examples(rules: RuleSet) -> list[str]:
    failures = []
    for example in iter_examples(rules):
        failure = example_failure(example, rules)
        if example.todo:
            if failure is None:
                failures.append(f"{example.rule_id} {example.label}: marked {example.expect} but now passes; drop the todo- prefix")
        elif failure:
            failures.append(failure)
    return failures
