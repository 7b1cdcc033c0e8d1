"""Accuracy per DeepSpeed / torch release pair: the releases each manifest case really ran.

A case's release is its manifest's `deepspeed` and `torch` fields (the versions the generating run
imported); cases without them are grouped as "release not recorded". Pairs sort by DeepSpeed
release, then torch release, oldest first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

NOT_RECORDED = "release not recorded"


def release_of(deepspeed, torch) -> str | None:
    """The pair label of a manifest entry, e.g. "deepspeed 0.14.5, torch 2.5.1+cu124"."""
    if not deepspeed and not torch:
        return None
    return f"deepspeed {deepspeed or '?'}, torch {torch or '?'}"


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
    result: dict[str, ReleaseTally] = {}
    for outcome in outcomes:
        case = outcome.case
        row = result.setdefault(case.release or NOT_RECORDED, ReleaseTally(tally_type()))
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
    return {label: result[label] for label in sorted(result, key=_order)}


def render_releases(rows: dict[str, ReleaseTally], table, pct) -> list[str]:
    if not rows:
        return []
    out = [["accuracy per release pair", "cases", "top-1", "top-3", "unknown", "negatives diagnosed", "clean fired"]]
    for label, row in rows.items():
        t = row.labelled
        out.append([label, str(t.cases), f"{t.top1} {pct(t.top1, t.cases)}", f"{t.top3} {pct(t.top3, t.cases)}",
                    str(t.unknown), f"{row.negatives_diagnosed} of {row.negatives}", f"{row.clean_fired} of {row.clean}"])
    return table(out, right={1, 2, 3, 4, 5, 6}, indent="") + [""]
