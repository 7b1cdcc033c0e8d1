"""`ds-triage chat [--ckpt DIR] [--config FILE]`: an interactive triage session (triage/chat/)."""

from __future__ import annotations

import os
import sys

from triage.cli.output import add_rules_options
from triage.cli.probe import add_release_options, positive_int
from triage.errors import BadInput


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "chat",
        help="interactive triage: paste a trace, answer a few questions, get the verdict",
        description="Paste a failing job's log or traceback and be walked to the cause: the ranked causes, "
        "questions for the facts they need, the probes run on the checkpoint, the fix. /help lists the "
        "commands. With stdin piped, the whole input is one conversation answered in plain text; exit 0 "
        "when a cause was found (confirmed on the checkpoint when one was probed), 1 when none.",
    )
    parser.add_argument("--ckpt", metavar="DIR", help="the checkpoint the job failed to load (probed on request; "
                        "without a terminal, probed at once)")
    parser.add_argument("--config", metavar="FILE", help="the ds_config (JSON) the load uses")
    parser.add_argument("--world-size", type=positive_int, metavar="N", help="number of ranks the load runs on")
    parser.add_argument("--stage", type=int, choices=(0, 1, 2, 3), help="ZeRO stage the load uses")
    add_release_options(parser)
    parser.add_argument("--history", choices=("all", "commands", "off"),
                        help="what the terminal chat keeps in its history file (0600): everything, one-line "
                        "messages only (no pasted logs), or nothing on disk (default: $DS_TRIAGE_CHAT_HISTORY, else all)")
    add_rules_options(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from triage.chat.conversation import Conversation
    from triage.chat.session import Session
    from triage.kb import load_rules
    from triage.classify.render import Style

    given = {"ckpt": args.ckpt, "config": args.config, "stage": args.stage, "world_size": args.world_size,
             "deepspeed_version": args.deepspeed_version, "torch_version": args.torch_version}
    if args.ckpt:
        if not os.path.lexists(args.ckpt):
            raise BadInput(f"--ckpt {args.ckpt}: no such file or directory")
        given["ckpt"] = os.path.abspath(args.ckpt)
    if args.config:
        from triage.probe.target import read_config

        read_config(args.config)  # a missing or broken file is an error now, not in the middle of the chat
        given["config"] = os.path.abspath(args.config)
    session = Session(load_rules(args.rules), given=given)
    if not sys.stdin.isatty():
        from triage.chat.plain import run_plain

        conversation = Conversation(session, Style(False), interactive=False)
        return run_plain(conversation, sys.stdin.buffer.read(), sys.stdout.write)
    from triage.chat.app import run_terminal

    return run_terminal(Conversation(session, Style.for_stream(sys.stdout)), history=args.history)
