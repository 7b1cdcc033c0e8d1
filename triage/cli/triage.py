"""`ds-triage triage --log FILE --ckpt CKPT`: classify the log, then confirm or refute each cause on disk."""

from __future__ import annotations

import sys

from triage.cli.output import emit
from triage.cli.probe import add_target_options, context_from
from triage.errors import EXIT_FOUND, EXIT_UNKNOWN


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "triage",
        help="classify a log and probe the checkpoint it failed on",
        description="Classify a failing job's log, run the probes each hypothesis names on the checkpoint, and "
        "give the verdict: the confirmed cause first, refuted ones struck off. Exit 0 when a cause is confirmed, "
        "1 when none is (docs/exit-codes.md).",
    )
    parser.add_argument("--log", required=True, metavar="FILE", help="the job's log, or - for stdin")
    parser.add_argument("--ckpt", required=True, metavar="CKPT", help="the checkpoint (root, tag dir, shard, "
                        "or Hugging Face checkpoint-N dir)")
    parser.add_argument("--rules", metavar="DIR", help="rules directory (default: the bundled rules/)")
    add_target_options(parser)
    parser.epilog = "JSON: docs/schemas/triage.schema.json"
    parser.set_defaults(run=run)


def run(args) -> int:
    from triage.classify.classifier import classify
    from triage.logs.inputs import read_log
    from triage.kb import load_rules
    from triage.probe.render import render_triage
    from triage.probe.report import triage
    from triage.classify.render import Style

    log = read_log(args.log)
    ctx = context_from(args, log.text)
    report = classify(
        log.text, rules=load_rules(args.rules), truncated=log.truncated, decode_errors=log.decode_errors,
        facts={"ckpt": ctx.ckpt.root, "tag": ctx.ckpt.tag, "config": args.config},
    )
    result = triage(report, ctx)
    emit(args.json, result.to_json, lambda: render_triage(result, Style.for_stream(sys.stdout)))
    return EXIT_FOUND if result.confirmed else EXIT_UNKNOWN
