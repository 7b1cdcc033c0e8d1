"""`ds-triage classify [FILE|-]`: diagnose a pasted or saved log."""

from __future__ import annotations

import sys

from triage.cli.output import emit
from triage.cli.log_source import log_source
from triage.errors import EXIT_FOUND, EXIT_UNKNOWN


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "classify",
        help="diagnose a log (file or stdin)",
        description="Rank the likely root causes of a DeepSpeed checkpoint-loading failure in a log. "
        "Exit 0 when a cause is found, 1 when none is recognised.",
    )
    parser.add_argument("log", nargs="?", help="log file, or - for stdin (default: stdin when piped)")
    parser.add_argument("--json", action="store_true", help="print the JSON report (docs/schemas/classify.schema.json)")
    parser.add_argument("--rules", metavar="DIR", help="rules directory (default: the bundled rules/)")
    parser.add_argument("--ckpt", metavar="DIR", help="checkpoint directory, filled into the verify commands")
    parser.add_argument("--tag", help="checkpoint tag (e.g. global_step100)")
    parser.add_argument("--config", metavar="FILE", help="your ds_config file, filled into the verify commands")
    parser.set_defaults(run=run)


def run(args) -> int:
    from triage.classify.classifier import classify
    from triage.logs.inputs import read_log
    from triage.kb import load_rules
    from triage.classify.render import Style, render_report

    source = log_source(args.log, "ds-triage classify - < job.log")
    log = read_log(source)
    rules = load_rules(args.rules)
    report = classify(
        log.text, rules=rules, truncated=log.truncated, decode_errors=log.decode_errors,
        facts={"ckpt": args.ckpt, "tag": args.tag, "config": args.config},
    )
    emit(args.json, report.to_json, lambda: render_report(report, Style.for_stream(sys.stdout)))
    return EXIT_FOUND if report.is_checkpoint_failure else EXIT_UNKNOWN
