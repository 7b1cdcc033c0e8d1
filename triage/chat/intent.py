"""What a one-line message means when it is no slash command: a command word typed without its
slash (`help`, `quit`), or a question to the chat (`what should I check first?`). Anything else is
left to the conversation: an answer, a log line, a path."""

from __future__ import annotations

import re

WORDS = {"help": "/help", "?": "/help", "quit": "/quit", "exit": "/quit", "bye": "/quit"}
ASKING = r"(?:what|which|how|why|where|when|who|should|can|could|would|do|does|did|is|are|any idea|now what)\b"
# a question in words: it starts with a question word and holds no path; ends with ?, or is short and
# has none of a log line's marks (`:`, `=`, brackets, double quotes)
QUESTION = re.compile(rf"^{ASKING}[^/\\]{{0,200}}\?$|^{ASKING}[^/\\:=\[\](){{}}\"]{{0,80}}$", re.I)


def command_word(line: str) -> str | None:
    """`help` -> /help, `quit` -> /quit (the slash forgotten); None for anything else."""
    return WORDS.get(line.strip().lower().rstrip(".!"))


def is_question(line: str) -> bool:
    return bool(QUESTION.match(line.strip()))
