"""Accuracy per group of cases: per DeepSpeed / torch release pair and per framework.

A case's release is its manifest's `deepspeed` and `torch` fields (the versions the generating run
imported); cases without them are grouped as "release not recorded". Pairs sort by DeepSpeed
release, then torch release, oldest first. A case's framework is its layout's `framework` (the
transformers Trainer, accelerate, PEFT: what called DeepSpeed or loaded the files), else the
framework packages it records; a case with neither loaded through DeepSpeed itself, and that group
comes first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

NOT_RECORDED = "release not recorded"
DIRECT = "DeepSpeed directly"


def release_of(deepspeed, torch) -> str | None:
    """The pair label of a manifest entry, e.g. "deepspeed 0.14.5, torch 2.5.1+cu124"."""
    if not deepspeed and not torch:
        return None
    return f"deepspeed {deepspeed or '?'}, torch {torch or '?'}"


def framework_of(entry: dict) -> str | None:
    """The framework label of a manifest entry: its layout's `framework` ("transformers Trainer"),
    else the packages its `frameworks` records ("lightning"); None: DeepSpeed directly."""
    layout = entry.get("layout")
    if isinstance(layout, dict) and layout.get("framework"):
        return str(layout["framework"])
    packages = entry.get("frameworks")
    return " + ".join(sorted(map(str, packages))) if isinstance(packages, dict) and packages else None


def _order(label: str) -> tuple:
    numbers = [tuple(int(n) for n in re.findall(r"\d+", part.split("+")[0])) for part in label.split(",")]
    return (label == NOT_RECORDED, numbers)


@dataclass
class ReleaseTally:
    """One pair's failure + silent accuracy (a triage.eval.evaluate.Tally) and its unlabelled logs."""
    labelled: object
    negatives: int = 0
    negatives_diagnosed: int = 0
    clean: int = 0
    clean_fired: int = 0
    missed: list[str] = field(default_factory=list)  # ids of labelled cases wrong at top-1

    def to_json(self) -> dict:
        return {**self.labelled.to_json(), "negatives": self.negatives, "negatives_diagnosed": self.negatives_diagnosed,
                "clean": self.clean, "clean_fired": self.clean_fired, "missed": list(self.missed)}


def by_release(outcomes, tally_type) -> dict[str, ReleaseTally]:
    """Release label -> ReleaseTally, in release order; {} when no case records its release."""
    if not any(o.case.release for o in outcomes):
        return {}
    result = _tallies(outcomes, tally_type, lambda case: case.release or NOT_RECORDED)
    return {label: result[label] for label in sorted(result, key=_order)}


def by_framework(outcomes, tally_type) -> dict[str, ReleaseTally]:
    """Framework label -> ReleaseTally, DeepSpeed directly first, then by name; {} when no case
    went through a framework."""
    if not any(o.case.framework for o in outcomes):
        return {}
    result = _tallies(outcomes, tally_type, lambda case: case.framework or DIRECT)
    return {label: result[label] for label in sorted(result, key=lambda label: (label != DIRECT, label))}


def direct_newest(outcomes, tally_type) -> tuple[str, ReleaseTally] | None:
    """(release label, tally) of the loads through DeepSpeed itself on the newest release pair the
    corpus holds: the yardstick each framework's and older pair's row is read against. None: no
    direct case records its release."""
    direct = [o for o in outcomes if not o.case.framework and o.case.release]
    if not direct:
        return None
    newest = max({o.case.release for o in direct}, key=_order)
    return newest, _tallies([o for o in direct if o.case.release == newest], tally_type, lambda case: newest)[newest]


def below(rows: dict[str, ReleaseTally], yardstick: ReleaseTally) -> list[str]:
    """The labels of `rows` whose top-1 rate is lower than the yardstick's."""
    mark = yardstick.labelled.top1 / yardstick.labelled.cases if yardstick.labelled.cases else 0.0
    return [label for label, row in rows.items()
            if row.labelled.cases and row.labelled.top1 / row.labelled.cases < mark]


def _tallies(outcomes, tally_type, label_of) -> dict[str, ReleaseTally]:
    result: dict[str, ReleaseTally] = {}
    for outcome in outcomes:
        case = outcome.case
        row = result.setdefault(label_of(case), ReleaseTally(tally_type()))
        if case.kind in ("failure", "silent"):
            row.labelled.add(outcome)
            if outcome.category != case.expected_category:
                row.missed.append(case.id)
        elif case.kind == "negative":
            row.negatives += 1
            row.negatives_diagnosed += outcome.is_checkpoint_failure
        elif case.kind == "clean":
            row.clean += 1
            row.clean_fired += bool(outcome.guesses)
    return result


def render_groups(title: str, rows: dict[str, ReleaseTally], table, pct) -> list[str]:
    """A table of per-group accuracy headed `title` ("accuracy per release pair"), or nothing."""
    if not rows:
        return []
    out = [[title, "cases", "top-1", "top-3", "unknown", "negatives diagnosed", "clean fired"]]
    for label, row in rows.items():
        t = row.labelled
        out.append([label, str(t.cases), f"{t.top1} {pct(t.top1, t.cases)}", f"{t.top3} {pct(t.top3, t.cases)}",
                    str(t.unknown), f"{row.negatives_diagnosed} of {row.negatives}", f"{row.clean_fired} of {row.clean}"])
    return table(out, right={1, 2, 3, 4, 5, 6}, indent="") + [""]
