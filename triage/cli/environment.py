"""Every environment variable ds-triage reads: shown under the top-level `--help` and in the
guide (tests/test_environment.py checks both against the variables the package reads)."""

from __future__ import annotations

VARIABLES = (
    ("DS_TRIAGE_RULES", "the rules directory in place of the bundled one (as --rules)"),
    ("DS_TRIAGE_EXTRA_RULES", "directories of your own rules loaded beside it, ':'-separated (as --extra-rules)"),
    ("DS_TRIAGE_DOCS_URL", "base URL of the published docs site, for runbook links (as --docs-url)"),
    ("DS_TRIAGE_CHAT_HISTORY", "what chat keeps on disk: all, commands or off (as chat --history)"),
    ("DS_TRIAGE_TRUST_HARDLINKS", "1: read files with several hard links (a cp -al snapshot) instead of refusing them"),
    ("DS_TRIAGE_JSON", "stream's JSON record parser: msgspec (default when installed), orjson or json"),
    ("DS_TRIAGE_REGEX_ENGINE", "re: run the rules' regexes on Python's re instead of RE2 (debugging only)"),
    ("DS_TRIAGE_DEBUG", "1: show the traceback of an internal error instead of a one-line message"),
    ("NO_COLOR", "set non-empty: no colour (as --color never)"),
    ("FORCE_COLOR", "set non-empty: colour even when not a terminal (as --color always)"),
    ("COLUMNS", "the width reports and help are wrapped to (default: the terminal's)"),
    ("XDG_CACHE_HOME", "where the compiled rules are cached (default ~/.cache/ds-triage)"),
    ("XDG_STATE_HOME", "where chat keeps its history (default ~/.local/state/ds-triage)"),
)


def help_text(columns: int = 80) -> str:
    import textwrap

    width = max(len(name) for name, _ in VARIABLES)
    indent = " " * (width + 4)
    return "environment:\n" + "\n".join(
        textwrap.fill(meaning, max(columns - 2, width + 30), initial_indent=f"  {name.ljust(width)}  ",
                      subsequent_indent=indent, break_on_hyphens=False)
        for name, meaning in VARIABLES)


def markdown_table() -> str:
    return "| variable | effect |\n|---|---|\n" + "\n".join(f"| `{name}` | {meaning} |" for name, meaning in VARIABLES)
