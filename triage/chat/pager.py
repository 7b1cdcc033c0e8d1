"""Replies on a terminal: wrapped at its width (wrap.py), and a reply taller than the screen shown a
screenful at a time, as `less` would: space the next page, Enter the next line, q the rest skipped.

The pager's prompt is a one-line prompt_toolkit application on the chat's own input and output,
run between two of the chat's prompts, so it works wherever the prompt does (a pipe in the tests).
"""

from __future__ import annotations

from typing import Callable

from triage.chat.wrap import wrap

MORE = "-- more ({shown} of {total} lines): space next page, Enter next line, q quit --"
KEYS = {" ": "page", "f": "page", "pagedown": "page", "enter": "line", "down": "line", "j": "line",
        "q": "quit", "Q": "quit", "escape": "quit", "c-c": "quit", "c-d": "quit"}


class Pager:
    def __init__(self, write: Callable[[str], None], size: Callable[[], tuple[int, int]],
                 ask: Callable[[str], str] | None = None):
        """size() -> (rows, columns), read at each reply (the terminal may be resized); ask(prompt)
        -> "page" | "line" | "quit"; None: wrap only, never page (a dumb terminal)."""
        self.write, self.size, self.ask = write, size, ask

    def width(self) -> int:
        return self.size()[1] - 1  # a line as wide as the screen makes some terminals add an empty one

    def show(self, text: str) -> None:
        if not text:
            return
        rows = wrap(text.rstrip("\n"), self.width())
        room = max(self.size()[0] - 1, 1)  # the last row is the pager's prompt
        if self.ask is None or len(rows) <= room:
            self.write("\n".join(rows) + "\n")
            return
        shown, step = 0, room
        while shown < len(rows):
            self.write("\n".join(rows[shown:shown + step]) + "\n")
            shown += len(rows[shown:shown + step])
            if shown == len(rows):
                return
            key = self.ask(MORE.format(shown=shown, total=len(rows)))
            if key == "quit":
                self.write(f"({len(rows) - shown} more lines not shown)\n")
                return
            step = 1 if key == "line" else room


def ask_key(input=None, output=None) -> Callable[[str], str]:
    """The pager's prompt: `prompt` shown on one line until one of KEYS is pressed; erased after."""
    from prompt_toolkit.application import Application
    from prompt_toolkit.key_binding import KeyBindings
    from prompt_toolkit.layout import FormattedTextControl, Layout, Window

    bindings = KeyBindings()
    for key, answer in KEYS.items():
        bindings.add(key)(lambda event, answer=answer: event.app.exit(result=answer))

    def ask(prompt: str) -> str:
        control = FormattedTextControl([("reverse", prompt)], show_cursor=False)
        return Application(layout=Layout(Window(control, height=1)), key_bindings=bindings, input=input,
                           output=output, erase_when_done=True).run()

    return ask


def for_session(session, write: Callable[[str], None], paging: bool = True) -> Pager:
    """The pager on a PromptSession's terminal (its size, its input)."""
    def size() -> tuple[int, int]:
        found = session.output.get_size()
        return found.rows, found.columns

    return Pager(write, size, ask_key(session.input, session.output) if paging else None)
