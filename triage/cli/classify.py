"""`ds-triage classify [FILE ...|-]`: diagnose pasted or saved logs."""

from __future__ import annotations

import json
import sys

from triage.cli.output import add_docs_url_option, add_format_option, add_rules_options
from triage.cli.log_source import log_source
from triage.errors import EXIT_BAD_INPUT, EXIT_FOUND, EXIT_UNKNOWN, BadInput
from triage.runbook.links import page_ref


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "classify",
        help="diagnose a log (files or stdin)",
        description="Rank the likely root causes of a DeepSpeed checkpoint-loading failure in a log. "
        "Exit 0 when a cause is found (in any of the logs), 1 when none is recognised, 3 when a log "
        "cannot be read (the others are still classified).",
    )
    parser.add_argument("logs", nargs="*", metavar="LOG",
                        help="log files (.gz read as they are), or - for stdin (default: stdin when piped); "
                        "each is classified on its own")
    add_format_option(parser, ("text", "json", "markdown"), f"{page_ref('reference/classify')}; several logs: "
                      "one report per line, each with its `source`")
    add_rules_options(parser)
    add_docs_url_option(parser)
    parser.add_argument("--ckpt", metavar="DIR", help="checkpoint directory, filled into the verify commands")
    parser.add_argument("--tag", help="checkpoint tag (e.g. global_step100)")
    parser.add_argument("--config", metavar="FILE", help="your ds_config file, filled into the verify commands")
    parser.set_defaults(run=run)


def run(args) -> int:
    from triage.kb import load_rules

    sources = args.logs or [log_source(None, "ds-triage classify - < job.log")]
    rules = load_rules(args.rules)
    found = unreadable = False
    for number, source in enumerate(sources):
        try:
            report, text = _classify(source, rules, args)
        except BadInput as exc:  # one bad log among several: say so, go on with the others
            if len(sources) == 1:
                raise
            print(f"ds-triage: error: {exc.message}", file=sys.stderr)
            unreadable = True
            continue
        found |= report.is_checkpoint_failure
        sys.stdout.write(_form(args, rules, report, text, source, several=len(sources) > 1, first=number == 0))
    if unreadable:
        return EXIT_BAD_INPUT
    return EXIT_FOUND if found else EXIT_UNKNOWN


def _classify(source: str, rules, args):
    from triage.classify.classifier import classify
    from triage.logs.inputs import read_log

    log = read_log(source)
    report = classify(
        log.text, rules=rules, truncated=log.truncated, decode_errors=log.decode_errors, cuts=log.cuts,
        facts={"ckpt": args.ckpt, "tag": args.tag, "config": args.config},
    )
    return report, log.text


def _form(args, rules, report, text: str, source: str, several: bool, first: bool) -> str:
    from triage.classify.render import Style, render_brief, render_report

    if args.format == "json":
        data = report.to_json()
        if several:  # JSON lines: one report a log, named
            return json.dumps({"source": source, **data}) + "\n"
        return json.dumps(data, indent=2) + "\n"
    if args.format == "markdown":
        from triage.chat.export import report_markdown

        body = report_markdown(rules, text, report, given={"ckpt": args.ckpt, "config": args.config})
    elif args.quiet:
        body = render_brief(report)
    else:
        body = render_report(report, Style.for_stream(sys.stdout), full=args.verbose) + _to_decide(report, text)
    if not several:
        return body
    if args.quiet and args.format == "text":  # one line a log, like grep -H
        return f"{source}: {body}"
    return ("" if first else "\n") + f"==> {source} <==\n" + body


def _to_decide(report, text: str) -> str:
    """One line: the read-only command whose output tells the top causes apart (triage/evidence/question.py)."""
    from triage.evidence.question import for_report

    q = for_report(report, text)
    return f"\n{q.one_line()}\n" if q else ""
