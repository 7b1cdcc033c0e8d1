"""`ds-triage eval [CORPUS_DIR]`: measure the rules against a labelled corpus."""

from __future__ import annotations

import sys

from triage.cli.output import add_progress_options, emit
from triage.errors import EXIT_FOUND, EXIT_UNKNOWN
from triage.runbook.links import page_ref


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="measure the rules against a labelled corpus (accuracy, false positives, speed)",
        description="Classify every log of a labelled corpus (manifest.yaml) and compare with its label. "
        "Exit 0 when the gates pass (top-1 >= 0.95, no negative diagnosed, no clean log firing; "
        "with --set field: top-1 >= 0.90, top-3 >= 0.97, no negative diagnosed), "
        "1 when they fail, 3 when the corpus cannot be read.",
    )
    parser.add_argument("corpus", nargs="?", metavar="CORPUS_DIR", help="corpus directory holding manifest.yaml (default: the bundled corpus/)")
    parser.add_argument("--set", dest="set_name", choices=("corpus", "field"), default="corpus",
                        help="corpus: the captured DeepSpeed runs (default); field: users' pastes written from "
                        "public threads, each citing its thread, scored against issue 17's goals")
    parser.add_argument("--json", action="store_true", help=f"print the JSON result ({page_ref('reference/eval')})")
    parser.add_argument("--rules", metavar="DIR", help="rules directory (default: the bundled rules/)")
    parser.add_argument("--pastes", action="store_true",
                        help="also score the parts of each log people paste (the exception line, the last lines, "
                        "no frames, wrapped, behind other loggers' prefixes) against the whole log (~10 s more)")
    add_progress_options(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from triage.eval.corpus import load_cases, run_cases
    from triage.eval.render import render
    from triage.eval.evaluate import evaluate
    from triage.kb import load_rules
    from triage.kb.index import REPO_ROOT

    field = args.set_name == "field"
    if field:
        from triage.eval import field as field_set

        corpus = args.corpus or str(REPO_ROOT / field_set.FIELD_DIR)
        cases = field_set.load_field_cases(corpus, args.rules)
    else:
        corpus = args.corpus or str(REPO_ROOT / "corpus")
        cases = load_cases(corpus)  # before the rules: a bad corpus dir is reported first
    rules = load_rules(args.rules)
    outcomes = run_cases(corpus, cases, rules)
    result = (evaluate(outcomes, field_set.TOP1_GOAL, field_set.TOP3_GOAL) if field else evaluate(outcomes))
    rule_set = {"directory": str(rules.directory), "count": len(rules.rules), "digest": rules.digest}
    pastes = None
    if args.pastes:
        from triage.eval import pastes as paste_curve

        pastes = paste_curve.measure(corpus, cases, rules)

    def as_json() -> dict:
        data = result.to_json(corpus=str(corpus), rule_set=rule_set, set_name=args.set_name)
        if pastes is not None:
            data["pastes"] = [row.to_json() for row in pastes]
        return data

    def as_text() -> str:
        text = render(result, corpus, len(rules.rules), args.set_name)
        return text if pastes is None else text + "\n" + "\n".join(paste_curve.render(pastes)) + "\n"

    emit(args.json, as_json, as_text)
    if not result.passed:
        failed = "; ".join(g.detail for g in result.gates if not g.passed)
        print(f"ds-triage: eval gates failed: {failed}", file=sys.stderr)
    return EXIT_FOUND if result.passed else EXIT_UNKNOWN
