"""`ds-triage probe CKPT`: check a checkpoint on disk, read-only, and say what is wrong with it."""

from __future__ import annotations

import argparse
import os
import sys

from triage.cli.output import add_format_option, add_progress_options, emit
from triage.errors import EXIT_PROBE_CLEAN, EXIT_PROBE_FOUND, BadInput, UsageError
from triage.runbook.links import page_ref


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def byte_size(text: str) -> int:
    """`256G`, `512M`, `1.5T`, `1048576`: bytes (K, M, G, T are powers of 1024)."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    number, unit = text.strip().upper().removesuffix("B").removesuffix("I"), ""
    if number[-1:] in units:
        number, unit = number[:-1], number[-1]
    try:
        value = float(number) * units[unit]
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 256G, 512M)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return int(value)


def seconds(text: str) -> float:
    """A positive number of seconds (`--timeout 90`, `--timeout 2.5`)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text!r}")
    return value


def release(text: str) -> str:
    """A release number as pip shows it (`0.16.4`, `2.5.1+cu121`)."""
    from triage.probe.checks.version import parse

    if parse(text) is None:
        raise argparse.ArgumentTypeError(f"not a release number: {text!r} (e.g. 0.16.4)")
    return text.strip()


def add_release_options(parser) -> None:
    parser.add_argument("--deepspeed-version", type=release, metavar="X.Y.Z",
                        help="the DeepSpeed release the loading job runs, when it is not this host's (default: the "
                        "log's banner, else the installed one); without either the version probe is inconclusive")
    parser.add_argument("--torch-version", type=release, metavar="X.Y.Z",
                        help="the torch release the loading job runs, when it is not this host's")


def add_timeout_option(parser, what: str, default: str) -> None:
    parser.add_argument("--timeout", type=seconds, metavar="SECONDS",
                        help=f"stop {what} after this long: it and every process it started are killed, exit 6 "
                        f"(default {default})")


def add_target_options(parser) -> None:
    parser.add_argument("--config", metavar="FILE", help="the ds_config (JSON) the load uses: compared with the saved one")
    parser.add_argument("--world-size", type=positive_int, metavar="N", help="number of ranks the load runs on")
    parser.add_argument("--stage", type=int, choices=(0, 1, 2, 3), help="ZeRO stage the load uses")
    parser.add_argument("--model", metavar="FILE", help="the model the load builds: a JSON/YAML of parameter names to "
                        "shapes, a state-dict file (.pt/.bin, read without torch.load) or a .safetensors file")
    parser.add_argument("--optimizer", metavar="NAME", help="the optimizer class the load builds (AdamW, SGD, ...)")
    parser.add_argument("--param-groups", type=positive_int, metavar="N",
                        help="number of param groups the load's optimizer has")
    parser.add_argument("--load-dir", metavar="DIR", help="the dir the job passes to load_checkpoint / --load, when "
                        "CKPT is not it: checked for being one level off (triage: the log's, else --ckpt)")
    parser.add_argument("--deep", action="store_true",
                        help="read every byte once, streaming: the CRC-32 of every record, and the consistency probe "
                        "(each rank's fp32 master partition against its slice of the module weights, partition sizes, "
                        "step counters: shards DeepSpeed would load without a word)")
    parser.add_argument("--reproduce", action="store_true",
                        help="also load it with DeepSpeed for real (torchrun on CPU, --world-size ranks, --config or the "
                        "log's or the saved ds_config) and classify what the load prints; seconds to minutes")
    parser.add_argument("--model-factory", metavar="MODULE:FUNCTION",
                        help="with --reproduce: a function returning your model (or a dict with model, optimizer); "
                        "default: a stand-in with the saved parameter names and shapes")
    parser.add_argument("--trust-checkpoint", action="store_true",
                        help="with --reproduce: load it even when a file it opens is not verified safe (a pickle "
                        "naming code to run, a legacy or unreadable file); only for a checkpoint you trust")
    parser.add_argument("--host-memory", type=byte_size, metavar="SIZE",
                        help="memory of the node the load runs on (e.g. 256G), when it is not this host: "
                        "runs the memory probe against it")
    parser.add_argument("--ranks-per-node", type=positive_int, metavar="N",
                        help="ranks loading on one node (default: the world size): runs the memory probe")
    parser.add_argument("--as-user", metavar="USER",
                        help="check permissions as the job's user (name, uid or uid:gid; needs root): root itself "
                        "reads everything")
    add_release_options(parser)
    add_timeout_option(parser, "the real load of --reproduce", "900")
    add_progress_options(parser)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "probe",
        help="check a checkpoint on disk (read-only)",
        description="Run every probe on a DeepSpeed checkpoint, in the order path -> permission -> integrity -> "
        "version -> config -> model -> optimizer (-> consistency with --deep, -> reproduce), and summarise what is wrong. Never writes to the checkpoint, never runs its pickles. "
        "Exit 0 when nothing is wrong, 1 when a probe found a problem.",
    )
    parser.add_argument("ckpt", metavar="CKPT", help="checkpoint root (the --load dir), a global_stepN dir, a shard "
                        "file, or a Hugging Face checkpoint-N dir")
    add_target_options(parser)
    add_format_option(parser, ("text", "json"), f"{page_ref('reference/probe')}")
    parser.set_defaults(run=run)
    parser.epilog = f"JSON: {page_ref('reference/probe')}"


def context_from(args, log_text: str | None = None):
    from triage.probe.context import ProbeContext
    from triage.probe.target import LOG_LOADS, from_args, given_releases

    if args.reproduce:  # before anything runs: without them the load's ImportError is no verdict
        from triage.probe import deps

        deps.require(deps.LOAD, "--reproduce")
    if not os.path.lexists(args.ckpt):
        raise BadInput(f"{args.ckpt}: no such file or directory")
    target = from_args(args.stage, args.world_size, args.config, log_text, model=args.model,
                       optimizer=args.optimizer, param_groups=args.param_groups, load_dir=args.load_dir)
    given_releases(target, args.deepspeed_version, args.torch_version)
    if log_text is not None:
        target.log_path = getattr(args, "log", None)  # triage's --log; the chat's pasted log has no file
    if (log_text is not None and not (target.load_dir and os.path.isdir(target.load_dir)) and engine_log(target)
            and LOG_LOADS.search(log_text)):
        # triage: --ckpt is the checkpoint the job failed on; unless the log names a dir
        # that exists here, take it as the dir the job loaded. Not for a converter's log
        # (zero_to_fp32, ds_to_universal): those take a tag dir by design; nor for a log that
        # loads nothing (a training run that saved): its --ckpt is where it saved.
        target.load_dir, target.sources["load_dir"] = args.ckpt, "--ckpt"
    if args.model_factory and ":" not in args.model_factory:
        raise UsageError(f"--model-factory {args.model_factory}: expected MODULE:FUNCTION, e.g. mymodels:build")
    who = None
    if args.as_user:
        from triage.probe import as_user

        who = as_user.resolve(args.as_user)
        if not who.is_current and os.geteuid() != 0:
            raise UsageError(f"--as-user {args.as_user}: only root can check as another user; run ds-triage as "
                             f"{who.name} instead (sudo -u {who.name} ds-triage ...)")
    ctx = ProbeContext.for_path(args.ckpt, target, deep=args.deep, reproduce=args.reproduce,
                                model_factory=args.model_factory, host_memory=args.host_memory,
                                trust_checkpoint=args.trust_checkpoint,
                                ranks_per_node=args.ranks_per_node, as_user=who, timeout=args.timeout)
    ckpt = ctx.ckpt
    if target.load_tag and ckpt.tag_source != "given" and target.load_tag in ckpt.tags:
        ckpt.tag, ckpt.tag_source = target.load_tag, "log"  # the tag the job really opened
    return ctx


def engine_log(target) -> bool:
    """The log shows a DeepSpeed engine starting (its release banner, distributed groups, the engine
    configuration), so `load_checkpoint` ran; a converter's log shows none of them."""
    return any(target.sources.get(name, "").startswith("the log")
               for name in ("ds_version", "dp", "mp", "pipeline", "world_size", "stage"))


def run(args) -> int:
    from triage.probe.render import render_probe
    from triage.probe.report import probe_all
    from triage.classify.render import Style

    ctx = context_from(args)
    asked = ("memory",) if args.host_memory or args.ranks_per_node else ()
    report = probe_all(ctx, asked)
    emit(args.format == "json", report.to_json, lambda: render_probe(report, Style.for_stream(sys.stdout)))
    return EXIT_PROBE_FOUND if report.problems else EXIT_PROBE_CLEAN
