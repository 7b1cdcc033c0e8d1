"""What a one-line message means when it is no slash command: a command word typed without its
slash (`help`, `quit`), or a question to the chat (`what should I check first?`). Anything else is
left to the conversation: an answer, a log line, a path."""

from __future__ import annotations

import re

WORDS = {"help": "/help", "?": "/help", "quit": "/quit", "exit": "/quit", "bye": "/quit"}
# a question in words: ends with ?, starts with a question word, holds no path and no log shape
QUESTION = re.compile(r"^(?:what|which|how|why|where|should|can|could|do|does|is|are|now what)\b[^/\\]{0,200}\?$",
                      re.I)


def command_word(line: str) -> str | None:
    """`help` -> /help, `quit` -> /quit (the slash forgotten); None for anything else."""
    return WORDS.get(line.strip().lower().rstrip(".!"))


def is_question(line: str) -> bool:
    return bool(QUESTION.match(line.strip()))
