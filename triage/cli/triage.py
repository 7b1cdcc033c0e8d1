"""`ds-triage triage --log FILE --ckpt CKPT`: classify the log, then confirm or refute each cause on disk."""

from __future__ import annotations

import sys

from triage.cli.output import add_docs_url_option, add_format_option, add_rules_options, emit_format
from triage.cli.probe import add_target_options, context_from
from triage.errors import EXIT_FOUND, EXIT_UNKNOWN, BadInput, UsageError
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
    parser.add_argument("--ckpt", metavar="CKPT", help="the checkpoint (root, tag dir, shard, "
                        "or Hugging Face checkpoint-N dir); or, without it, --evidence")
    parser.add_argument("--evidence", nargs="+", metavar="FILE", help="files of command output pasted from the host "
                        "that has the checkpoint (ls -la, find, tree, stat, cat latest, id, namei -l, findmnt, pip show, "
                        "a ds_config, ...; `ds-triage collect DIR` writes them all), or - for stdin: decided on them "
                        "instead of --ckpt, no file of the checkpoint read")
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
    if getattr(args, "evidence", None) and not args.ckpt:
        return _from_evidence(args, log, classify, load_rules(args.rules))
    if not args.ckpt:
        raise UsageError("triage needs --ckpt CKPT (the checkpoint here) or --evidence FILE... (its pasted listings)")
    ctx = context_from(args, log.text)
    rules = load_rules(args.rules)
    report = classify(
        log.text, rules=rules, truncated=log.truncated, decode_errors=log.decode_errors, cuts=log.cuts,
        facts={"ckpt": ctx.ckpt.root, "tag": ctx.ckpt.tag, "config": args.config},
    )
    return rules, log, report, triage(report, ctx)


def _from_evidence(args, log, classify, rules):
    """--evidence: the checkpoint known from pasted output (triage/evidence/), decided by the same probes."""
    from triage import evidence
    from triage.evidence import apply
    from triage.logs.inputs import read_log
    from triage.probe.report import triage

    items = []
    for name in args.evidence:
        for item in evidence.read(read_log(name).text):
            item.source = "stdin" if name == "-" else name
            items.append(item)
    if not evidence.has_evidence(items):
        raise BadInput("--evidence: no command output recognised in " + ", ".join(args.evidence)
                       + " (ls -la, find, tree, stat, cat latest, id, namei -l, pip show, a ds_config, ...)")
    text = "\n".join(filter(None, [log.text, evidence.log_text(items)]))
    ctx = apply.context(items, text, {"stage": args.stage, "world_size": args.world_size, "config": args.config})
    report = classify(text, rules=rules, truncated=log.truncated, decode_errors=log.decode_errors, cuts=log.cuts,
                      facts={"ckpt": ctx.ckpt.root, "tag": ctx.ckpt.tag, "config": args.config})
    result = triage(report, ctx)
    result.to_json = lambda: apply.to_json(result)  # with the evidence that decided each cause
    return rules, log, report, result


def brief(result) -> str:
    """-q: the verdict in one line: `status category [RULE]`."""
    v = result.verdict
    return f"{v['status']} {v['category']}" + (f" [{v['rule_id']}]" if v.get("rule_id") else "") + "\n"


def _markdown(rules, log: str, report, result, args) -> str:
    from triage.chat.export import report_markdown

    given = {"ckpt": args.ckpt, "config": args.config, "stage": args.stage, "world_size": args.world_size}
    return report_markdown(rules, log, report, triage=result, given=given, by="triage")
