"""`ds-triage completion bash|zsh|tcsh|fish`: the shell completion script, made from the parser itself
(shtab; fish by triage.cli.fish), so it always knows every subcommand and option of this release."""

from __future__ import annotations

import sys

SHELLS = ("bash", "zsh", "tcsh", "fish")
# positional and option metavars that name files or directories: the shell offers paths for them
FILES = {"LOG", "FILE", "FILE|-", "KEY", "CKPT"}
DIRS = {"DIR", "OUT"}


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "completion", help="print the shell completion script (bash, zsh, tcsh, fish)",
        description="Print a completion script for SHELL. bash: `ds-triage completion bash > "
        "~/.local/share/bash-completion/completions/ds-triage`; zsh: `ds-triage completion zsh > "
        "\"${fpath[1]}/_ds-triage\"`; fish: `ds-triage completion fish > "
        "~/.config/fish/completions/ds-triage.fish`.")
    parser.add_argument("shell", choices=SHELLS)
    parser.set_defaults(run=run)


def run(args) -> int:
    from triage.cli import build_parser

    parser = build_parser()
    if args.shell == "fish":
        from triage.cli.fish import script

        sys.stdout.write(script(parser, FILES, DIRS))
        return 0
    import shtab

    for action in _actions(parser):
        metavar = action.metavar if isinstance(action.metavar, str) else None
        if metavar in FILES:
            action.complete = shtab.FILE
        elif metavar in DIRS:
            action.complete = shtab.DIRECTORY
    sys.stdout.write(shtab.complete(parser, shell=args.shell))
    return 0


def _actions(parser):
    for action in parser._actions:
        yield action
        for sub in (getattr(action, "choices", None) or {}).values() if action.nargs == "A..." else ():
            yield from _actions(sub)
