"""`ds-triage repair ACTION CKPT`: fix a checkpoint with DeepSpeed's own tools; dry run by default."""

from __future__ import annotations

import sys

from triage.cli.output import add_progress_options, emit
from triage.cli.probe import add_timeout_option, positive_int
from triage.repair import registry
from triage.repair import EXIT_NOT_REPAIRED, EXIT_REPAIRED
from triage.runbook.links import page_ref


def register(subparsers) -> None:
    actions = "\n".join(f"  {name:16s} {registry.summary(name)}" for name in registry.names())
    parser = subparsers.add_parser(
        "repair", help="fix a checkpoint (dry run unless --apply)",
        description="Repair a DeepSpeed checkpoint with DeepSpeed's own tools. Prints the plan and writes nothing "
        "unless --apply. Never modifies the original: results go to a new dir or file (--out; default a sibling "
        "named after the action); `latest` alone is edited in place, after a dated backup, by an atomic replace. "
        "With --apply the result is verified: its structure always, and by a real DeepSpeed load (in a "
        "subprocess) when --model-factory names your model. Exit 0: planned, or repaired and verified; 1: "
        "refused or verification failed.",
        epilog=f"actions:\n{actions}\n\nJSON: {page_ref('reference/repair')}",
        formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    parser.add_argument("action", metavar="ACTION", choices=registry.names(), help=", ".join(registry.names()))
    parser.add_argument("ckpt", metavar="CKPT", help="checkpoint root (the --load dir) or a tag dir")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--apply", action="store_true", help="do it, then verify the result")
    mode.add_argument("--dry-run", action="store_true", help="print the plan only (the default)")
    parser.add_argument("--out", metavar="PATH", help="where the result goes (must not exist)")
    parser.add_argument("--tag", help="the tag to read (latest: the tag to point at); default: `latest`'s")
    parser.add_argument("--config", metavar="FILE", help="your ds_config (JSON): the base of `config`, and the "
                        "config the verifying load starts its engine with (default: the one saved in the checkpoint)")
    parser.add_argument("--model-factory", metavar="MODULE:FUNCTION", help="a function (importable from the "
                        "current dir) returning your nn.Module, (module, optimizer), or {'model': ..., 'optimizer': "
                        "..., 'batch': (inputs...)}: enables the real DeepSpeed load that verifies the result (with a "
                        "batch, one training step after it)")
    parser.add_argument("--world-size", type=positive_int, metavar="N", help="ranks the verifying load runs on "
                        "(default: as saved; fp32 and strip-optimizer: 1)")
    parser.add_argument("--safetensors", action="store_true", help="fp32: write .safetensors instead of .bin")
    parser.add_argument("--max-shard-size", metavar="SIZE", help="fp32: split the output into shards of at most "
                        "SIZE (e.g. 5GB) with an index JSON")
    parser.add_argument("--trust-checkpoint", action="store_true", help="with --apply: convert and load it even "
                        "when a file it opens is not verified safe (a pickle naming code to run, a legacy or "
                        "unreadable file; refused otherwise, exit 5); only for a checkpoint you trust")
    add_timeout_option(parser, "each DeepSpeed tool --apply runs (the conversion, then the verifying load)",
                       "3600 for a conversion, 1800 for the load")
    parser.add_argument("--json", action="store_true", help="print the JSON result")
    add_progress_options(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from triage.classify.render import Style
    from triage.repair.apply import Outcome, apply, make_plan
    from triage.repair.plan import Options
    from triage.repair.render import render

    if args.model_factory and ":" not in args.model_factory:
        from triage.errors import UsageError

        raise UsageError(f"--model-factory {args.model_factory}: expected MODULE:FUNCTION, e.g. mymodels:build")
    options = Options(out=args.out, tag=args.tag, config=args.config, world_size=args.world_size,
                      model_factory=args.model_factory, safetensors=args.safetensors,
                      max_shard_size=args.max_shard_size, trust_checkpoint=args.trust_checkpoint,
                      timeout=args.timeout)
    plan = make_plan(args.action, args.ckpt, options)
    outcome = apply(plan, options) if args.apply else Outcome(plan)
    emit(args.json, outcome.to_json, lambda: render(outcome, Style.for_stream(sys.stdout)))
    return EXIT_REPAIRED if outcome.ok else EXIT_NOT_REPAIRED
