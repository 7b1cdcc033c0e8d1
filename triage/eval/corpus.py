"""Read a labelled corpus (manifest.yaml + logs) and classify every case once.

The manifest is a YAML list of cases: `id`, `log` (a path under the corpus dir),
`kind` (failure, silent, negative, clean), `expected_category` (required for failure and
silent cases), the optional `expected_rule`, and the optional `deepspeed` and `torch`
releases the case ran (accuracy per release pair). A case without `log` is skipped.
Problems with the corpus are `BadInput` (exit 3), one line each.
"""

from __future__ import annotations

import time
from pathlib import Path

from triage import progress
from triage.errors import BadInput
from triage.eval.evaluate import KINDS, LABELLED, Case, Outcome, outcome_from_report
from triage.eval.releases import framework_of, release_of

MANIFEST = "manifest.yaml"


def load_cases(corpus_dir: str | Path) -> list[Case]:
    import yaml
    from triage.kb.source import load_yaml

    corpus = Path(corpus_dir)
    if not corpus.is_dir():
        raise BadInput(f"no such corpus directory: {corpus}")
    manifest = corpus / MANIFEST
    if not manifest.is_file():
        raise BadInput(f"{corpus} has no {MANIFEST}: pass a corpus directory (default: the bundled corpus/)")
    try:
        entries = load_yaml(manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BadInput(f"{manifest}: cannot read the manifest: {first}") from None
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        raise BadInput(f"{manifest}: expected a list of cases, got {type(entries).__name__}")
    cases = []
    for number, entry in enumerate(entries, start=1):
        case = _case(entry, number, manifest)
        if case is not None:
            cases.append(case)
    return cases


def _case(entry, number: int, manifest: Path) -> Case | None:
    where = f"{manifest}: case #{number}"
    if not isinstance(entry, dict):
        raise BadInput(f"{where}: expected a mapping with id, log, kind")
    if entry.get("id"):
        where += f" ({entry['id']})"
    if not entry.get("log"):
        return None
    for key in ("id", "kind"):
        if not entry.get(key):
            raise BadInput(f"{where}: lacks '{key}'")
    if entry["kind"] not in KINDS:
        raise BadInput(f"{where}: kind {entry['kind']!r} is not one of {', '.join(KINDS)}")
    if entry["kind"] in LABELLED and not entry.get("expected_category"):
        raise BadInput(f"{where}: a {entry['kind']} case needs expected_category")
    return Case(str(entry["id"]), str(entry["log"]), entry["kind"],
                entry.get("expected_category"), entry.get("expected_rule"), entry.get("url"),
                release_of(entry.get("deepspeed"), entry.get("torch")), framework_of(entry))


def read_case_log(corpus_dir: str | Path, case: Case):
    """The case's log as `classify` reads it (triage.logs.inputs: decoded, NULs dropped)."""
    from triage.logs.inputs import decode_log

    path = Path(corpus_dir) / case.log
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BadInput(f"{path}: cannot read the log of case {case.id}: {exc.strerror or exc}") from None
    return decode_log(data, str(path))


def run_cases(corpus_dir: str | Path, cases: list[Case], rules) -> list[Outcome]:
    """Classify each case's log once with the given rules, timing the classify call."""
    from triage.classify.classifier import classify
    from triage.eval.ambiguity import fingerprint

    outcomes = []
    right = labelled = 0
    with progress.meter("eval: logs classified", len(cases), unit="logs") as shown:
        for case in cases:
            log = read_case_log(corpus_dir, case)
            started = time.perf_counter()
            report = classify(log.text, rules=rules, truncated=log.truncated, decode_errors=log.decode_errors, cuts=log.cuts)
            elapsed = time.perf_counter() - started
            printed = fingerprint(log.text, case.id) if case.kind in LABELLED else ()
            outcomes.append(outcome_from_report(case, report, elapsed, len(log.text.splitlines()), printed))
            if case.kind in LABELLED:
                labelled += 1
                right += outcomes[-1].category == case.expected_category
                shown.set_postfix_str(f"top-1 so far {right}/{labelled}", refresh=False)
            shown.update()
    return outcomes
