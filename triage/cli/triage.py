"""`ds-triage triage --log FILE --ckpt CKPT`: classify the log, then confirm or refute each cause on disk."""

from __future__ import annotations

import sys

from triage.cli.output import add_docs_url_option, add_format_option, add_rules_options, emit_format
from triage.cli.probe import add_target_options, context_from
from triage.errors import EXIT_FOUND, EXIT_UNKNOWN
from triage.runbook.links import page_ref


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "triage",
        help="classify a log and probe the checkpoint it failed on",
        description="Classify a failing job's log, run the probes each hypothesis names on the checkpoint, and "
        "give the verdict: the confirmed cause first, refuted ones struck off. Exit 0 when a cause is confirmed, "
        "1 when none is.",
    )
    parser.add_argument("--log", required=True, metavar="FILE", help="the job's log, or - for stdin")
    parser.add_argument("--ckpt", required=True, metavar="CKPT", help="the checkpoint (root, tag dir, shard, "
                        "or Hugging Face checkpoint-N dir)")
    add_rules_options(parser)
    add_docs_url_option(parser)
    add_target_options(parser)
    add_format_option(parser, ("text", "json", "markdown"), f"{page_ref('reference/triage')}")
    parser.epilog = f"JSON: {page_ref('reference/triage')}"
    parser.set_defaults(run=run)


def run(args) -> int:
    from triage.probe.render import render_triage
    from triage.classify.render import Style

    rules, log, report, result = triaged(args)
    emit_format(args.format, result.to_json, {
        "text": lambda: brief(result) if args.quiet else render_triage(result, Style.for_stream(sys.stdout)),
        "markdown": lambda: _markdown(rules, log.text, report, result, args),
    })
    return EXIT_FOUND if result.confirmed else EXIT_UNKNOWN


def triaged(args):
    """(rules, log, classification, triage result) for parsed `triage` options: the command without
    its output, for callers that triage many checkpoints in one process."""
    from triage.classify.classifier import classify
    from triage.logs.inputs import read_log
    from triage.kb import load_rules
    from triage.probe.report import triage

    log = read_log(args.log)
    ctx = context_from(args, log.text)
    rules = load_rules(args.rules)
    report = classify(
        log.text, rules=rules, truncated=log.truncated, decode_errors=log.decode_errors,
        facts={"ckpt": ctx.ckpt.root, "tag": ctx.ckpt.tag, "config": args.config},
    )
    return rules, log, report, triage(report, ctx)


def brief(result) -> str:
    """-q: the verdict in one line: `status category [RULE]`."""
    v = result.verdict
    return f"{v['status']} {v['category']}" + (f" [{v['rule_id']}]" if v.get("rule_id") else "") + "\n"


def _markdown(rules, log: str, report, result, args) -> str:
    from triage.chat.export import report_markdown

    given = {"ckpt": args.ckpt, "config": args.config, "stage": args.stage, "world_size": args.world_size}
    return report_markdown(rules, log, report, triage=result, given=given, by="triage")
