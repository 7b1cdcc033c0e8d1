"""No terminal (stdin piped): the whole input is one conversation, answered in plain text.

The lines before the first slash command are the log (one message, as a paste is); from
the first command on, each non-empty line is one message: a command, or the answer to
what the previous one asked (`/run 2` then `yes`). A checkpoint given with --ckpt (or
`/set ckpt PATH`) is probed without asking.
"""

from __future__ import annotations

from typing import Callable

from triage.chat import commands
from triage.chat.conversation import Conversation
from triage.logs.inputs import LogText, decode_log


def run_plain(conversation: Conversation, data: bytes, write: Callable[[str], None]) -> int:
    whole = decode_log(data, "<stdin>")  # empty or binary input: BadInput, exit 3
    lines = whole.text.split("\n")
    first = next((i for i, line in enumerate(lines) if commands.lookup(line.strip())), len(lines))
    head = "\n".join(lines[:first])
    if head.strip():
        log = LogText(head, whole.source, whole.size, whole.truncated, whole.decode_errors)
        write(conversation.read_paste(log).text)  # command output pasted with it is evidence
    for line in lines[first:]:
        if not line.strip():
            continue
        write(f"> {line.strip()}\n")
        reply = conversation.handle(line)
        write(reply.text)
        if reply.done:
            break
    return conversation.exit_code()
