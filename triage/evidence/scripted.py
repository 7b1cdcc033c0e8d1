"""A scripted user for the deciding questions (issue 43, item 5): classify a log, ask the question,
let `run` answer it (the caller runs the asked command for real where the checkpoint is, read-only,
and returns its output), read the output as evidence, decide again; up to `answers` times.

The answer at each step is the verdict's category (confirmed or likely) once evidence is in, the
log's first hypothesis before. Pure but for `run`: no file is read here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from triage import evidence
from triage.evidence import apply
from triage.evidence.question import deciding


@dataclass
class Dialogue:
    answers: list[str] = field(default_factory=list)  # the top category after 0, 1, 2 ... answers
    statuses: list[str] = field(default_factory=list)  # "log", then the verdict's status after each answer
    asked: list[str] = field(default_factory=list)  # the commands asked, in order


def converse(log_text: str, rules, run: Callable[[str], str], answers: int = 2) -> Dialogue:
    """`run(command)`: the output of the asked command, CKPT and TAG filled in by the caller."""
    from triage.classify.classifier import classify
    from triage.probe.target import from_args

    report = classify(log_text, rules=rules)
    out = Dialogue([report.hypotheses[0].rule.category if report.hypotheses else "unknown"], ["log"])
    items: list = []
    seen: set = set()
    categories = [h.rule.category for h in report.hypotheses[:3]]
    target = from_args(None, None, None, log_text)
    for _ in range(answers):
        q = deciding(categories, target, seen, report.facts.get("ckpt") or target.load_dir,
                     report.facts.get("tag") or target.load_tag)
        if q is None:
            break
        seen.add(q.kind)
        out.asked.append(q.command)
        items += [i for i in evidence.read(f"$ {q.command}\n{run(q.command)}") if i.kind != "log"]
        result = apply.triage(report, items, log_text)
        out.answers.append(result.verdict["category"])
        out.statuses.append(result.verdict["status"])
        if result.confirmed:
            break
        categories = [p.hypothesis.rule.category for p in result.probed if p.decision.status != "refuted"][:3]
        seen |= {i.kind for i in items}
    return out
