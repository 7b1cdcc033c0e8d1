"""The terminal shell: a prompt_toolkit prompt reads each message, the conversation answers.

* A bracketed paste into an empty prompt is sent as it is, however many lines: one message.
  A terminal without bracketed paste (tmux without it, web consoles) sends the lines as keys:
  an Enter with more keys queued behind it (read in the same go, or still unread in the
  terminal's buffer), or handled within BURST_SECONDS of the key before it, is a newline of the paste, never
  a send, so a chained traceback's blank line does not cut it and its lines are not taken as
  answers (keys read in one go are handled microseconds apart; typed ones, 30 ms or more).
* Enter sends, at every prompt (the log's, a question's, a yes/no). To type several lines, end
  each but the last with Esc-Enter (Alt-Enter); a paste keeps its lines whatever Enter does.
* A reply is wrapped at the terminal's width, and one taller than the screen is paged (pager.py).
* Ctrl-C clears the current input; Ctrl-D (on an empty prompt) leaves.
* Completion: the slash commands, and paths wherever a path is asked for.
* History in $XDG_STATE_HOME/ds-triage/chat_history (default ~/.local/state), created 0600 in a
  0700 directory: pasted logs hold paths, host names and sometimes tokens. `--history commands`
  (or DS_TRIAGE_CHAT_HISTORY=commands) keeps one-line messages only, no pastes; `off` keeps
  nothing on disk. When it cannot be written, a warning and an in-memory history.
"""

from __future__ import annotations

import os
import select
import sys
import time
from pathlib import Path
from typing import Callable

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import Completer, Completion, PathCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.keys import Keys
from prompt_toolkit.utils import is_dumb_terminal

from triage.chat import commands
from triage.chat.conversation import Conversation
from triage.chat.pager import Pager, for_session
from triage.chat.reply import PATH

MAX_HISTORY_ENTRY = 256 * 1024  # a huge paste is not worth recalling with the arrow keys
# Keys closer than this are a paste (a terminal's write chunks), not typing (a fast typist's
# keys are 30 ms or more apart).
BURST_SECONDS = 0.012
# An Enter this soon after a key, in a message that a paste's keys already gave several lines, is one
# more line of that paste (its next chunk late over a slow link), not the person sending it.
PASTE_PAUSE = 0.15  # a person reads the paste before sending it: longer than this
ECHO_LINES = 6  # a longer message is echoed as one line: a 300-line paste should not fill the screen


def history_path(env=os.environ) -> Path:
    base = env.get("XDG_STATE_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative value is ignored
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "ds-triage" / "chat_history"


HISTORY_KEEPS = ("all", "commands", "off")


class ChatHistory(FileHistory):
    """FileHistory that warns once instead of failing when the file cannot be written, and
    with `keep="commands"` stores no multi-line message (a paste)."""

    def __init__(self, filename: Path, warn: Callable[[str], None], keep: str = "all"):
        super().__init__(str(filename))
        self.warn, self.warned, self.keep = warn, False, keep

    def store_string(self, string: str) -> None:
        if len(string) > MAX_HISTORY_ENTRY or (self.keep == "commands" and "\n" in string.strip()):
            return
        try:
            super().store_string(string)
        except OSError as exc:
            if not self.warned:
                self.warned = True
                self.warn(f"ds-triage: warning: cannot write the chat history {self.filename}: "
                          f"{exc.strerror or exc}; it is kept in memory for this session")


def open_history(warn: Callable[[str], None], env=os.environ, keep: str | None = None) -> History:
    """The chat's history; `keep` (else $DS_TRIAGE_CHAT_HISTORY, else "all") is one of HISTORY_KEEPS."""
    keep = keep or env.get("DS_TRIAGE_CHAT_HISTORY") or "all"
    if keep not in HISTORY_KEEPS:
        warn(f"ds-triage: warning: DS_TRIAGE_CHAT_HISTORY={keep!r} is not one of {', '.join(HISTORY_KEEPS)}; "
             "keeping no history on disk")
        keep = "off"
    if keep == "off":
        return InMemoryHistory()
    path = history_path(env)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600))
        os.chmod(path, 0o600)  # a history made by an older version was world-readable
    except OSError as exc:
        warn(f"ds-triage: warning: no chat history ({path}: {exc.strerror or exc}); "
             "this session's history is kept in memory")
        return InMemoryHistory()
    return ChatHistory(path, warn, keep)


class ChatCompleter(Completer):
    """Slash commands (with their help), fact names after /set, paths where a path is asked."""

    def __init__(self, conversation: Conversation):
        self.conversation = conversation
        self.paths = PathCompleter(expanduser=True)

    def get_completions(self, document: Document, complete_event):
        text = document.text_before_cursor
        if "\n" in text:
            return
        ask = self.conversation.pending
        if ask is not None and ask.input == PATH:  # `/` starts a path as well as a command: offer both
            yield from self.paths.get_completions(document, complete_event)
        if not text.startswith("/"):
            return
        name, sep, arg = text.partition(" ")
        if not sep:
            if "/" in name[1:]:
                return
            for command in commands.REGISTRY.values():
                if command.name.startswith(name):
                    yield Completion(command.name, -len(name), display_meta=command.help)
            return
        command = commands.REGISTRY.get(name)
        if command is None:
            return
        if command.completes == "fact":
            fact, sep, value = arg.partition(" ")
            if not sep:
                for word in commands.fact_words():
                    if word.startswith(fact):
                        yield Completion(word, -len(fact))
                return
            if commands.FACT_NAMES.get(fact) in ("ckpt", "config"):
                yield from self.paths.get_completions(Document(value), complete_event)
        elif command.completes == PATH:
            yield from self.paths.get_completions(Document(arg), complete_event)


class Burst:
    """Whether the key being handled is part of a paste: the key before it was handled only
    BURST_SECONDS ago. `saw_key` runs after every key (the key processor's after_key_press)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, queued_is_paste: bool = True):
        # queued_is_paste=False only for tests that feed typed keys through a pipe all at once
        self.clock, self.last, self.queued_is_paste = clock, float("-inf"), queued_is_paste
        self.pasting = False  # the message being written has lines from a paste's keys

    def __call__(self) -> bool:
        return self.clock() - self.last < BURST_SECONDS

    def paused(self) -> bool:
        """Within PASTE_PAUSE of the key before: a pause inside a paste, not a person's."""
        return self.clock() - self.last < PASTE_PAUSE

    def saw_key(self, _sender=None) -> None:
        self.last = self.clock()


def unread_input(terminal_input) -> bool:
    """Bytes are waiting on the input's file descriptor (False when it has none)."""
    try:
        return bool(select.select([terminal_input.fileno()], [], [], 0)[0])
    except (AttributeError, NotImplementedError, OSError, ValueError):
        return False


def paste_newline(burst: Burst, queued: bool, text: str) -> bool:
    """Whether an Enter is a line of a paste, not the person sending: keys queued behind it, the
    key before it a burst's, or a pause shorter than PASTE_PAUSE in a message a paste began."""
    return burst() or queued or (burst.pasting and "\n" in text and burst.paused())


def key_bindings(burst: Burst) -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add("enter")
    def _enter(event) -> None:
        buffer = event.current_buffer
        state = buffer.complete_state
        # keys still queued behind this Enter, read in the same go or still waiting to be read
        # (a paste comes in 1 KiB reads): a paste, whatever the clock says (a loaded machine can
        # take longer than BURST_SECONDS between two keys of one read)
        queued = burst.queued_is_paste and (bool(event.app.key_processor.input_queue)
                                            or unread_input(event.app.input))
        if paste_newline(burst, queued, buffer.text):
            buffer.newline(copy_margin=False)
            burst.pasting = True
        elif state is not None and state.current_completion is not None:
            buffer.apply_completion(state.current_completion)
        else:
            burst.pasting = False
            buffer.validate_and_handle()

    @bindings.add("escape", "enter")
    def _newline(event) -> None:  # Alt-Enter: a typed message of several lines
        burst.pasting = False
        event.current_buffer.newline(copy_margin=False)

    @bindings.add(Keys.BracketedPaste)
    def _paste(event) -> None:
        # A paste into an empty prompt is the whole message; into a started one, part of it.
        buffer = event.current_buffer
        data = event.data.replace("\r\n", "\n").replace("\r", "\n")
        started = bool(buffer.text.strip())
        buffer.insert_text(data)
        if not started and data.strip():
            buffer.validate_and_handle()

    return bindings


def prompt_session(conversation: Conversation, history: History | None = None, input=None,
                   output=None, clock: Callable[[], float] = time.monotonic,
                   queued_is_paste: bool = True) -> PromptSession:
    burst = Burst(clock, queued_is_paste)
    session = PromptSession(
        multiline=True, key_bindings=key_bindings(burst), completer=ChatCompleter(conversation),
        complete_while_typing=True, history=history or InMemoryHistory(), input=input, output=output,
        erase_when_done=True,  # run_app echoes the message itself, a long paste as one line
        prompt_continuation=lambda width, line_number, wrap_count: "." * (width - 1) + " ",
    )
    session.app.key_processor.after_key_press += burst.saw_key
    return session


def echo(prompt: str, message: str) -> str:
    lines = message.rstrip("\n").split("\n")
    if len(lines) > ECHO_LINES:
        first = next((line.strip() for line in lines if line.strip()), "")[:80]
        return f"{prompt}[{len(lines)} lines pasted: {first} ...]\n"
    return prompt + "\n... ".join(lines) + "\n"


def run_app(conversation: Conversation, session: PromptSession, write: Callable[[str], None],
            echo_input: bool = True, pager: Pager | None = None) -> int:
    """Read, answer, repeat, until /quit or Ctrl-D. Returns the exit code (0). `echo_input`: the
    prompt erased the message (erase_when_done), so it is written back, a long one shortened.
    `pager`: the replies wrapped at the terminal's width and paged (else written as they are)."""
    show = pager.show if pager is not None else write
    show(conversation.greeting())
    while True:
        prompt = conversation.prompt()
        try:
            message = session.prompt(prompt)
        except KeyboardInterrupt:  # Ctrl-C: the input is dropped, the session goes on
            continue
        except EOFError:  # Ctrl-D
            break
        if echo_input:
            show(echo(prompt, message))
        if pager is not None:
            conversation.width = pager.width()  # a page rendered to a width (/runbook) fits this one
        try:
            reply = conversation.handle(message)
        except Exception as exc:  # a bug must not end the incident the user is working on
            if os.environ.get("DS_TRIAGE_DEBUG"):
                raise
            show(f"ds-triage: internal error: {type(exc).__name__}: {exc} "
                  "(DS_TRIAGE_DEBUG=1 shows the traceback; please report it)\n")
            continue
        show(reply.text)
        if reply.done:
            break
    return 0


def run_terminal(conversation: Conversation, history: str | None = None) -> int:
    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    def warn(text: str) -> None:
        print(text, file=sys.stderr)

    # A dumb terminal gets prompt_toolkit's plain prompt, which prints what is typed and erases nothing;
    # its replies are wrapped, not paged.
    session = prompt_session(conversation, open_history(warn, keep=history))
    dumb = is_dumb_terminal()
    return run_app(conversation, session, write, echo_input=not dumb,
                   pager=for_session(session, write, paging=not dumb))
