"""What the conversation answers, and what it waits for next."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

PATH, NUMBER, YES_NO = "path", "number", "yes/no"


@dataclass
class Ask:
    """The next message answers this: a fact (`fact` set) or a yes/no (`on_yes` set)."""

    text: str  # the question, as shown
    input: str  # PATH | NUMBER | YES_NO: how the prompt reads it (completion, prompt label)
    fact: str | None = None
    default: str | None = None  # used when the answer is empty
    on_yes: Callable[[], "Reply"] | None = None
    yes_by_default: bool = False
    then: Callable[[], "Reply"] | None = None  # after a valid fact: this, instead of the next question


@dataclass
class Reply:
    text: str = ""
    done: bool = False  # /quit: the session ends

    def __add__(self, other: "Reply") -> "Reply":
        parts = [p for p in (self.text.rstrip("\n"), other.text.rstrip("\n")) if p]
        return Reply("\n".join(parts) + ("\n" if parts else ""), self.done or other.done)


def reply(*lines: str) -> Reply:
    text = "\n".join(lines)
    return Reply(text + "\n" if text else "")
