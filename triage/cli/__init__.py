"""`ds-triage` command line: one module per subcommand, a thin dispatcher here."""

from __future__ import annotations

import argparse
import os
import sys

from triage import __version__
from triage.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, TriageError

SUBCOMMANDS = ("classify", "probe", "triage", "eval", "rules", "runbook", "repair", "verify", "manifest", "chat", "stream", "serve")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ds-triage",
        description="Diagnose DeepSpeed checkpoint-loading failures. Exit codes: docs/exit-codes.md.",
    )
    parser.add_argument("--version", action="version", version=f"ds-triage {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        module = __import__(f"triage.cli.{name}", fromlist=["register"])
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if hasattr(args, "quiet"):  # the commands that can take long: progress on stderr (triage/progress/)
        from triage import progress

        progress.configure(getattr(args, "progress", False), args.quiet)
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
        if os.environ.get("DS_TRIAGE_DEBUG"):
            raise
        print(f"ds-triage: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        print("ds-triage: rerun with DS_TRIAGE_DEBUG=1 for the traceback, and please report it", file=sys.stderr)
        return EXIT_INTERNAL
