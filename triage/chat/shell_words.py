"""A command's words as sh would pass them to the program, for `/run`, which runs no shell.

sh's quoting is kept (single and double quotes, backslashes), so a command pasted from the
docs splits as it would in a terminal. Everything sh would act on instead of passing is
refused rather than passed on, since the user means the expansion: `$` and backticks (also in
double quotes), `;`, `|`, `&`, `<`, `>`, `(`, `)`, braces, a word's leading `~` or `#`, a second
line. Unquoted `*`, `?` and `[` are kept as a glob pattern, which triage.chat.readonly expands.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass

SHELL_SYNTAX = {"$": "`$` (expansion)", "`": "backticks (command substitution)", ";": "`;`", "|": "`|` (a pipe)",
                "&": "`&`", "<": "`<` (a redirection)", ">": "`>` (a redirection)", "(": "`(`", ")": "`)`",
                "{": "`{` (brace expansion)", "}": "`}`", "~": "`~` (home expansion)", "#": "`#` (a comment)"}
GLOB_CHARS = "*?["


@dataclass(frozen=True)
class Word:
    text: str  # what the program receives: quotes removed
    pattern: str | None = None  # a glob (quoted parts escaped) when it has an unquoted * ? [
    glob_at: int = 0  # where in `text` the first unquoted one is


def split(command: str) -> list[Word] | str:
    """The words sh would pass to the program, or why the chat will not run it: every character
    sh would expand or act on, unquoted (or `$`/backtick inside double quotes), is refused."""
    if "\n" in command or "\r" in command:
        return "it spans lines: a shell would run each as a command"
    if "\0" in command:
        return "it holds a NUL character"
    words: list[Word] = []
    text: list[str] = []
    pattern: list[str] = []
    glob_at, started, i, n = -1, False, 0, len(command)

    def literal(chars: str) -> None:
        text.append(chars)
        pattern.append(glob.escape(chars))

    while i < n:
        c = command[i]
        if c in " \t":
            if started:
                word = "".join(text)
                words.append(Word(word, "".join(pattern), glob_at) if glob_at >= 0 else Word(word))
                text, pattern, glob_at, started = [], [], -1, False
            i += 1
            continue
        at_start, started = not started, True
        if c == "\\":
            if i + 1 == n:
                return "it ends in a backslash"
            literal(command[i + 1])
            i += 2
        elif c == "'":
            end = command.find("'", i + 1)
            if end < 0:
                return "it has an unbalanced quote (')"
            literal(command[i + 1:end])
            i = end + 1
        elif c == '"':
            i += 1
            while i < n and command[i] != '"':
                ch = command[i]
                if ch in "$`":
                    return (f"it uses {SHELL_SYNTAX[ch]} in double quotes, which only a shell acts on, and the chat "
                            f"runs one program with no shell")
                if ch == "\\" and command[i + 1:i + 2] in ('$', '`', '"', "\\"):
                    i += 1
                    ch = command[i]
                literal(ch)
                i += 1
            if i >= n:
                return 'it has an unbalanced quote (")'
            i += 1
        elif c in GLOB_CHARS:
            glob_at = len("".join(text)) if glob_at < 0 else glob_at
            text.append(c)
            pattern.append(c)
            i += 1
        elif c in SHELL_SYNTAX and (at_start or c not in "~#"):
            return f"it uses {SHELL_SYNTAX[c]}, which only a shell acts on, and the chat runs one program with no shell"
        else:
            literal(c)
            i += 1
    if started:
        word = "".join(text)
        words.append(Word(word, "".join(pattern), glob_at) if glob_at >= 0 else Word(word))
    return words

