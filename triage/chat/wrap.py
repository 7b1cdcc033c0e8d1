"""A reply's lines wrapped at the terminal's width, between words: a terminal left to itself cuts a
long line at its last column, mid-word.

A continued line keeps its line's indent; a list item's continues under its text, a table row (`  /help    List
the commands.`) continues under its second column. Colour codes take no room. A word longer than
the line (a long path) is the only thing broken, after a `/` where it has one.
"""

from __future__ import annotations

import re
import unicodedata

MAX_WRAPPED = 16 * 1024  # a longer line (a /run output's) is left to the terminal: wrapping stays linear
ANSI = re.compile(r"\x1b\[[0-9;]*m")
LEADING = re.compile(r"^((?:\x1b\[[0-9;]*m)*)(\s*)")  # colour codes, then the indent
COLUMN = re.compile(r"^\s*\S+(?: \S+)*?\s{2,}(?=\S)")  # a table row: its first cell, then 2+ spaces
ITEM = re.compile(r"^\s*(?:\d+\.|\[\d+\]|-|\*)\s")  # a numbered or bulleted item
SPACES = re.compile(r"(\s+)")  # split on, kept: the words, each with the space before it


def width_of(text: str) -> int:
    """Columns `text` takes on a terminal: no colour codes, wide (CJK) characters two."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
               for c in ANSI.sub("", text))


def wrap(text: str, width: int) -> list[str]:
    """Every line of `text`, wrapped to at most `width` columns."""
    return [row for line in text.split("\n") for row in wrap_line(line, width)]


def wrap_line(line: str, width: int) -> list[str]:
    if len(line) > MAX_WRAPPED or width_of(line) <= width:
        return [line]
    codes, indent = LEADING.match(line).groups()
    body = line[len(codes) + len(indent):]
    plain = ANSI.sub("", line)
    column, item = COLUMN.match(plain), ITEM.match(plain)
    hang = len(item.group()) if item else len(column.group()) if column else len(indent)
    hang = " " * min(hang, width // 2)
    rows, row = [], codes + indent
    empty = True  # nothing but the indent on the row yet
    pieces = SPACES.split(body)  # [word, space, word, ...]: the body starts after the indent
    for space, word in zip([""] + pieces[1::2], pieces[0::2]):
        if not word:
            continue
        joined = row + ("" if empty else space) + word
        if width_of(joined) <= width:
            row, empty = joined, False
            continue
        if not empty:
            rows.append(row)
            row, empty = hang, True
        while width_of(row + word) > width:  # longer than a whole row: the only word broken
            piece = _head(word, width - width_of(row))
            rows.append(row + piece)
            row, word = hang, word[len(piece):]
        row, empty = row + word, False
    rows.append(row)
    return rows


def _head(word: str, room: int) -> str:
    """The longest start of `word` within `room` columns (at least one character), ending after a
    `/` when one falls in its last two thirds."""
    cut = max(room, 1)
    while cut > 1 and width_of(word[:cut]) > room:
        cut -= 1
    slash = word.rfind("/", 0, cut)
    return word[:slash + 1] if slash >= room // 3 else word[:cut]
