"""Writing a command's result, and the options every subcommand shares for it.

`--color`, `-q` and `-v` are added to every subcommand in one place (`add_common_options`);
`--format` (with `--json` as its short form) only where a command has more than one form.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable  # typing's import costs a cold start ~3 ms

COLOR_CHOICES = ("auto", "always", "never")


class ParagraphFormatter(argparse.HelpFormatter):
    """Description and epilog wrapped paragraph by paragraph; a paragraph with indented lines
    (a list of actions) is kept as written."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        # argparse imports shutil for the width, ~2 ms of every start (each add_argument makes a
        # formatter): the same answer as shutil.get_terminal_size, from os
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap  # only when help is shown

        def fill(para: str) -> str:  # URLs and option names are never broken at a hyphen
            return textwrap.fill(" ".join(para.split()), width, initial_indent=indent, subsequent_indent=indent,
                                 break_on_hyphens=False, break_long_words=False)

        return "\n\n".join(para if "\n  " in para or para.startswith("  ") else fill(para)
                           for para in text.split("\n\n"))


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose help, and its subcommands' (add_subparsers makes them of its own
    class), ParagraphFormatter lays out. An epilog may be a function, called only when help is
    shown: a wrapped epilog costs every start textwrap's import."""

    def __init__(self, *args, formatter_class=ParagraphFormatter, **kwargs):
        super().__init__(*args, formatter_class=formatter_class, **kwargs)

    def format_help(self) -> str:
        if callable(self.epilog):
            self.epilog = self.epilog()
        return super().format_help()


def _columns() -> int:
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def add_common_options(parser) -> None:
    """The options of every subcommand (added by the dispatcher, after each module registers)."""
    parser.add_argument("--color", choices=COLOR_CHOICES, default="auto",
                        help="colour the terminal report: auto (a TTY, unless NO_COLOR is set non-empty; "
                        "FORCE_COLOR set non-empty forces it), always, never")
    loud = parser.add_mutually_exclusive_group()
    loud.add_argument("-q", "--quiet", action="store_true",
                      help="less output: the answer only (classify, triage), no notes or progress on stderr")
    loud.add_argument("-v", "--verbose", action="store_true",
                      help="more output: every piece of evidence; the traceback of an internal error")


def add_rules_options(parser, where: str = "") -> None:
    """`--rules DIR` (the set in place of the bundled one) and `--extra-rules DIR` (a set loaded beside
    it, repeatable); the dispatcher puts the extra directories in $DS_TRIAGE_EXTRA_RULES, where every
    loader (and serve's, stream's workers) finds them."""
    parser.add_argument("--rules", metavar="DIR", help=f"rules directory in place of the bundled rules/{where} "
                        "(default: $DS_TRIAGE_RULES, else the bundled set)")
    parser.add_argument("--extra-rules", metavar="DIR", action="append", default=[],
                        help="a directory of your own rules, loaded beside the main set under its schema "
                        "(rule ids must not repeat); repeatable (default: $DS_TRIAGE_EXTRA_RULES, "
                        "directories separated by ':')")


def add_format_option(parser, formats: tuple[str, ...], schema: str) -> None:
    """`--format` among `formats` (the first is the default) and `--json` for `--format json`."""
    parser.add_argument("--format", choices=formats, default=formats[0],
                        help=f"output form: {', '.join(formats)} (json: {schema})")
    parser.add_argument("--json", dest="format", action="store_const", const="json", help="same as --format json")


def add_docs_url_option(parser) -> None:
    """--docs-url: the base of the published docs site, for each hypothesis' runbook_url."""
    from triage.runbook.links import ENV, check_docs_url

    parser.add_argument("--docs-url", metavar="URL", type=check_docs_url,
                        help=f"base URL of the published ds-triage docs site, for each hypothesis' runbook_url "
                        f"(default: ${ENV}; none: runbook_url is null)")


def emit(as_json: bool, data: Callable[[], dict], text: Callable[[], str]) -> None:
    """Both are thunks: only the form asked for is built."""
    if as_json:
        json.dump(data(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(text())


def emit_format(form: str, data: Callable[[], dict], texts: dict[str, Callable[[], str]]) -> None:
    """--format: json from `data`, any other form from its thunk in `texts`."""
    emit(form == "json", data, texts.get(form, texts["text"]))


def add_progress_options(parser) -> None:
    """`--progress`, for the commands that can take long (triage.progress; the dispatcher turns
    progress on or off from it and the common `-q`)."""
    parser.add_argument("--progress", action="store_true",
                        help="show progress on stderr even when it is not a terminal (default: on a terminal only)")
