"""`ds-triage rules lint|list|docs`: check, list and document the knowledge base."""

from __future__ import annotations

import sys
from pathlib import Path

from triage.cli.output import add_rules_options
from triage.errors import EXIT_BAD_RULES


def register(subparsers) -> None:
    parser = subparsers.add_parser("rules", help="lint, list or document the rules", description="Work with the rule files.")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    lint = actions.add_parser(
        "lint", help="validate every rule file (schema, regexes and their time, examples, cross-rule checks)",
        description="Validate every rule file: the schema, each regex (it compiles, and its time grows linearly "
        "with the log on pump strings), example files, cross-rule checks. Problems read path:line: problem. Remedy.")
    add_rules_options(lint)
    lint.add_argument("--examples", action="store_true", help="also run every rule's examples")
    lint.set_defaults(run=run_lint)
    listing = actions.add_parser("list", help="list the rules: id, category, title")
    add_rules_options(listing)
    listing.set_defaults(run=run_list)
    docs = actions.add_parser(
        "docs", help="generate docs/rules/*.md, docs/load-sites.md, docs/reference/*.md and the message index",
        description="Write docs/rules/index.md, one docs/rules/<ID>.md per rule, docs/load-sites.md, "
        "docs/reference/index.md with one docs/reference/<name>.md per JSON output schema in docs/schemas/, and "
        "the message index classify reads (rules/load-site-messages.json). "
        "With --check, write nothing and exit 1 when the docs on disk differ.",
    )
    add_rules_options(docs)
    docs.add_argument("--out", metavar="DIR", help="docs directory (default: docs/ beside the rules directory); "
                      "the message index, otherwise written into the rules directory, goes there too")
    docs.add_argument("--check", action="store_true", help="exit 1 if the generated docs differ from what is on disk")
    docs.set_defaults(run=run_docs)


def run_lint(args) -> int:
    from triage.kb import load_rules

    rules = load_rules(args.rules, use_cache=False, examples=True, linear=True)  # raises BadRules with every problem
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


def run_docs(args) -> int:
    from triage.runbook import docgen
    from triage.kb import load_rules

    rules = load_rules(args.rules)
    out = args.out or rules.directory.resolve().parent / "docs"
    sites, versions = docgen.load_sites()
    files = docgen.generate(rules, out, sites, versions)
    index_path, index_text = docgen.message_index(rules, sites, versions)
    if args.out:  # everything generated goes where --out says; classify reads the index beside the rules
        index_path = Path(args.out) / index_path.name
    index_current = index_path.is_file() and index_path.read_text(encoding="utf-8") == index_text
    if args.check:
        problems = docgen.stale(out, files) + ([] if index_current else [f"changed {index_path}"])
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        if problems:
            print(f"ds-triage: docs are stale: run `{docgen.REGENERATE}`", file=sys.stderr)
            return 1
        print(f"{len(files)} docs and the message index up to date")
        return 0
    changed = docgen.write(out, files)
    if not index_current:
        index_path.write_text(index_text, encoding="utf-8")
        changed.append(f"wrote {index_path}")
    for line in changed:
        print(line, file=sys.stderr)
    print(f"{len(files)} docs and the message index, {len(changed)} changed")
    return 0
