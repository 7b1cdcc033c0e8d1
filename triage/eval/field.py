"""The field set (issue 17, point 4): users' pastes, written from public threads, under corpus/field/.

A field case is a corpus case (triage.eval.corpus) that must also name the public thread it
was written from (`url`) and, when it is a failure, a category of the rule schema as the cause
that thread established. The set is scored against the issue's goals: top-1 >= 0.90 and
top-3 >= 0.97; its negatives (not checkpoint-loading failures) must not be diagnosed.
Reading the manifest problems are `BadInput`, one line each, like the corpus's.
"""

from __future__ import annotations

import json
from pathlib import Path

from triage.errors import BadInput
from triage.eval.corpus import MANIFEST, load_cases
from triage.eval.evaluate import LABELLED, UNKNOWN, Case

SETS = ("corpus", "field")
FIELD_DIR = Path("corpus") / "field"  # under the repository root
TOP1_GOAL = 0.90
TOP3_GOAL = 0.97


def categories(rules_dir: str | Path | None = None) -> tuple[str, ...]:
    """The categories the rule schema allows (rules/schema.json), `unknown` included."""
    from triage.kb.index import default_rules_dir

    schema = Path(rules_dir or default_rules_dir()) / "schema.json"
    if not schema.is_file():
        schema = default_rules_dir() / "schema.json"
    data = json.loads(schema.read_text(encoding="utf-8"))
    return tuple(data["properties"]["category"]["enum"])


def load_field_cases(set_dir: str | Path, rules_dir: str | Path | None = None) -> list[Case]:
    """The set's cases, each checked for a thread URL and a category the rules know."""
    cases = load_cases(set_dir)
    known = set(categories(rules_dir))
    where = Path(set_dir) / MANIFEST
    for case in cases:
        problem = _problem(case, known)
        if problem:
            raise BadInput(f"{where}: case {case.id}: {problem}")
    return cases


def _problem(case: Case, known: set[str]) -> str | None:
    if not case.url or not str(case.url).startswith(("https://", "http://")):
        return "lacks 'url', the public thread the case was written from"
    if case.kind == "clean":
        return "kind clean has no place in the field set (failure, silent or negative)"
    if case.kind in LABELLED and case.expected_category not in known:
        return f"expected_category {case.expected_category!r} is not a rule category"
    if case.kind == "negative" and case.expected_category not in (None, UNKNOWN):
        return "a negative case's expected_category is unknown"
    return None
