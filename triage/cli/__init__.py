"""`ds-triage` command line: one module per subcommand, a thin dispatcher here."""

from __future__ import annotations

import argparse
import gc
import os
import sys

from triage import __version__
from triage.cli.environment import help_text
from triage.cli.exit_codes import help_epilog
from triage.cli.output import Parser, _columns, add_common_options
from triage.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, TriageError

SUBCOMMANDS = ("classify", "probe", "triage", "eval", "rules", "runbook", "repair", "verify", "manifest", "inspect", "chat",
               "stream", "serve", "batch", "completion", "collect")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or with `only` that one subcommand's: each subcommand module
    imports what its options need, and a run of one command need not pay for all fourteen."""
    parser = Parser(
        prog="ds-triage",
        description="Diagnose DeepSpeed checkpoint-loading failures. Exit codes: each subcommand's --help.",
        epilog=lambda: help_text(_columns()),
    )
    parser.add_argument("-V", "--version", action="version", version=f"ds-triage {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in (only,) if only else SUBCOMMANDS:
        module = __import__(f"triage.cli.{name}", fromlist=["register"])
        module.register(subparsers)
    for name, sub in subparsers.choices.items():
        add_common_options(sub)
        sub.epilog = "\n\n".join(filter(None, [sub.epilog, help_epilog(name)]))
    return parser


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """parse_args, except that an option the subcommand does not know is reported with the
    subcommand's own usage (argparse leaves unknown options to the top parser's usage)."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        sub = _subparsers(parser).choices.get(args.command) if args.command else None
        (sub or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _command(argv: list[str]) -> str | None:
    """The subcommand named on the command line, when it comes first (options may follow it)."""
    return argv[0] if argv and argv[0] in SUBCOMMANDS else None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(_command(sys.argv[1:] if argv is None else argv))
    args = parse(parser, argv)
    if not getattr(args, "run", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    from triage.classify.render import Style

    Style.choice = args.color
    if getattr(args, "extra_rules", None):  # every loader, and serve's and stream's workers, read it there
        from triage.kb.index import EXTRA_ENV

        os.environ[EXTRA_ENV] = os.pathsep.join(os.path.abspath(d) for d in args.extra_rules)
    if getattr(args, "docs_url", None):
        from triage.runbook.links import set_docs_url

        set_docs_url(args.docs_url)
    if hasattr(args, "progress"):  # the commands that can take long: progress on stderr (triage/progress/)
        from triage import progress

        progress.configure(args.progress, args.quiet)
    # What exists now (modules, the parser) lives until exit: the collector need not walk it
    # again on each full collection (~4 ms of a cold classify).
    gc.freeze()
    try:
        return args.run(args)
    except TriageError as exc:
        for line in exc.message.splitlines() or [""]:
            print(f"ds-triage: error: {line}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # `ds-triage classify x | head`: the reader left; that is not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:  # never show a traceback to the person on call
        if os.environ.get("DS_TRIAGE_DEBUG") or args.verbose:
            raise
        print(f"ds-triage: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        print("ds-triage: rerun with DS_TRIAGE_DEBUG=1 for the traceback, and please report it", file=sys.stderr)
        return EXIT_INTERNAL
