"""`ds-triage runbook QUERY [--list] [--json]`: look a failure up by what the log says."""

from __future__ import annotations

import json
import shutil
import sys

from triage.cli.output import add_rules_options
from triage.errors import EXIT_FOUND, EXIT_UNKNOWN, UsageError
from triage.runbook.links import page_ref


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "runbook",
        help="look up a failure by error text, rule id or category and show its runbook page",
        description="Search the rules by what you see (an exception, a piece of the message, a rule id, "
        "a category) and show the best match as a runbook page: symptoms, cause, how to verify, fix, "
        "prevention, references; the next best are listed. Exit 0 when a good match is found, "
        "1 when none is, 2 on a usage error.",
    )
    parser.add_argument("query", nargs="*", metavar="QUERY", help="words to search for (quote them or not)")
    parser.add_argument("--list", action="store_true", help="list every rule by category")
    parser.add_argument("--json", action="store_true", help=f"print JSON ({page_ref('reference/runbook')})")
    add_rules_options(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from triage.runbook.search import build_index, search
    from triage.runbook.docgen import rule_sources
    from triage.kb import load_rules
    from triage.classify.render import Style
    from triage.runbook.render import page_json, render_list, render_others, render_page, to_json
    from triage.classify.example_lines import example_error

    query = " ".join(args.query).strip()
    if args.list and query:
        raise UsageError("give a QUERY or --list, not both")
    if not args.list and not query:
        raise UsageError("no QUERY: say what to look for (`ds-triage runbook 'size mismatch'`), or --list")
    rules = load_rules(args.rules)
    if args.list:
        if args.json:
            _dump(to_json(None, rules.rules, None))
        else:
            sys.stdout.write(render_list(rules.rules))
        return EXIT_FOUND

    found = search(build_index(rules.rules), query)
    best = found.best
    root = rules.directory.resolve().parent
    source = example = None
    if best is not None:
        path = rule_sources(rules).get(best.rule.id)
        source = path.resolve().relative_to(root).as_posix() if path else best.rule.path
        example = example_error(best.rule, root)
    if args.json:
        _dump(to_json(found, rules.rules, page_json(best.rule, source, example) if best else None))
    else:
        style = Style.for_stream(sys.stdout)
        out = []
        if found.kind == "category":
            out.append(style(f"category {found.category}: {len(found.results)} rule(s); the first:", "2") + "\n\n")
        if best is not None:
            width = min(100, shutil.get_terminal_size((100, 24)).columns - 1)
            out.append(render_page(best.rule, source, example, style, width))
        others = render_others(found, style)
        if others:
            out.append(("\n" if best is not None else "") + others)
        sys.stdout.write("".join(out))
    return EXIT_FOUND if best is not None else EXIT_UNKNOWN


def _dump(data: dict) -> None:
    json.dump(data, sys.stdout, indent=2)
    sys.stdout.write("\n")
