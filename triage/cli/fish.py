"""The fish completion script, made from the argparse parser as shtab makes bash's and zsh's
(shtab has no fish): one `complete` line a subcommand, option and choice list.

fish has no nested subcommand helper, so each line carries a condition: subcommands while none
is on the line yet (`__fish_use_subcommand`), a subcommand's options once it is there
(`__fish_seen_subcommand_from NAME`), and for `rules lint|list|docs` both names.
"""

from __future__ import annotations

import argparse

PROG = "ds-triage"


def script(parser: argparse.ArgumentParser, files: set[str], dirs: set[str]) -> str:
    lines = [f"# fish completion for {PROG}; made by `{PROG} completion fish`", f"complete -c {PROG} -f"]
    lines += _options(parser, "__fish_use_subcommand", files, dirs)
    lines += _subcommands(parser, "__fish_use_subcommand", (), files, dirs)
    return "\n".join(lines) + "\n"


def _subcommands(parser, condition: str, path: tuple[str, ...], files, dirs) -> list[str]:
    out: list[str] = []
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help for choice in action._choices_actions}
        for name, sub in action.choices.items():
            out.append(f"complete -c {PROG} -n {_quote(condition)} -a {name}" + _describe(helps.get(name)))
            seen = " && ".join(f"__fish_seen_subcommand_from {word}" for word in (*path, name))
            out += _options(sub, seen, files, dirs)
            nested = any(isinstance(a, argparse._SubParsersAction) for a in sub._actions)
            if nested:  # rules lint|list|docs: offered until one of them is on the line
                names = " ".join(next(a for a in sub._actions if isinstance(a, argparse._SubParsersAction)).choices)
                out += _subcommands(sub, f"{seen} && not __fish_seen_subcommand_from {names}", (*path, name),
                                    files, dirs)
            else:
                out += _positionals(sub, seen, files, dirs)
    return out


def _options(parser, condition: str, files, dirs) -> list[str]:
    out = []
    for action in parser._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue
        flags = []
        for option in action.option_strings:
            flags.append(f"-l {option[2:]}" if option.startswith("--") else f"-s {option[1:]}")
        line = f"complete -c {PROG} -n {_quote(condition)} {' '.join(flags)}"
        if action.nargs != 0:
            line += _values(action, files, dirs)
        out.append(line + _describe(action.help))
    return out


def _positionals(parser, condition: str, files, dirs) -> list[str]:
    return [f"complete -c {PROG} -n {_quote(condition)}{_values(action, files, dirs)}"
            for action in parser._actions if not action.option_strings and action.nargs != 0
            and (action.choices or _metavar(action) in files | dirs)]


def _values(action, files, dirs) -> str:
    if action.choices:
        return " -x -a " + _quote(" ".join(map(str, action.choices)))
    metavar = _metavar(action)
    if metavar in dirs:
        return " -x -a '(__fish_complete_directories)'"
    return " -r -F" if metavar in files else " -x"


def _metavar(action) -> str | None:
    return action.metavar if isinstance(action.metavar, str) else None


def _describe(text: str | None) -> str:
    if not text or text == argparse.SUPPRESS:
        return ""
    import textwrap

    first = text.split("; ")[0].split(". ")[0].replace("%%", "%")
    return " -d " + _quote(textwrap.shorten(first, 70, placeholder="..."))


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
