"""`ds-triage rules lint|list`: check and list the knowledge base."""

from __future__ import annotations

import sys

from triage.errors import EXIT_BAD_RULES


def register(subparsers) -> None:
    parser = subparsers.add_parser("rules", help="lint or list the rules", description="Work with the rule files.")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    lint = actions.add_parser("lint", help="validate every rule file (schema, regexes, examples, cross-rule checks)")
    lint.add_argument("--rules", metavar="DIR", help="rules directory (default: the bundled rules/)")
    lint.add_argument("--examples", action="store_true", help="also run every rule's examples")
    lint.set_defaults(run=run_lint)
    listing = actions.add_parser("list", help="list the rules: id, category, title")
    listing.add_argument("--rules", metavar="DIR")
    listing.set_defaults(run=run_list)


def run_lint(args) -> int:
    from triage.kb import load_rules

    rules = load_rules(args.rules, use_cache=False)  # raises BadRules with every problem
    failures = []
    if args.examples:
        from triage.kb.examples import check_examples

        failures = check_examples(rules)
        for failure in failures:
            print(failure, file=sys.stderr)
    print(f"{len(rules.rules)} rules OK" if not failures else f"{len(failures)} example(s) failed")
    return EXIT_BAD_RULES if failures else 0


def run_list(args) -> int:
    from triage.kb import load_rules

    for rule in sorted(load_rules(args.rules).rules, key=lambda r: (r.category, r.id)):
        print(f"{rule.id}  {rule.category:<22} {rule.title}")
    return 0
