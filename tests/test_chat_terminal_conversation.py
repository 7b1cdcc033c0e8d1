"""`ds-triage chat` in a real terminal (tmux, 80 columns by 50 rows) as a new user meets it, in one
session: a question typed at the prompt, `help` without a slash, the ~100-line /runbook page through
the pager (space, Enter, q), a pasted trace and the pasted real `ls -la` of a ZeRO-3 baseline, /verify,
then `quit` without a slash. Every word the terminal shows is compared with the replies the same
messages get from the conversation in this process: at 80 columns no word is cut."""

import shlex
import sys
import time

from tests.conftest import ROOT
from tests.probe_checkpoints import layout_base
from tests.test_chat_cli import Tmux
from tests.test_evidence_chat import listing, trace
from triage.chat import app
from triage.chat.conversation import Conversation
from triage.chat.session import Session

COLUMNS, ROWS = 80, 50
QUESTION = "what should I check first?"
RUNBOOK_END = "Full page with the signature and examples: ds-triage runbook DS-Z001"


def rows(tmux, everything: bool = True) -> list[str]:
    """The terminal's rows as it shows them (not joined): the scrollback too, or only the screen."""
    return tmux("capture-pane", "-p", *(("-S", "-") if everything else ()), "-t", "chat").splitlines()


def wait_rows(tmux, text: str, deadline: float = 60.0) -> list[str]:
    """The screen's rows once `text` is on one of them."""
    end = time.monotonic() + deadline
    while not any(text in row for row in rows(tmux, everything=False)):
        assert time.monotonic() < end, f"{text!r} not on the screen after {deadline} s:\n" + "\n".join(rows(tmux))
        time.sleep(0.1)
    return rows(tmux, everything=False)


def paged(tmux, text: str, deadline: float = 120.0) -> None:
    """Wait for `text`, paging on (space) while the pager asks."""
    end = time.monotonic() + deadline
    while not any(text in row for row in rows(tmux)):
        assert time.monotonic() < end, f"{text!r} not on the screen after {deadline} s"
        if rows(tmux, everything=False)[-1].startswith("-- more ("):
            key(tmux, "Space")
        time.sleep(0.2)


def key(tmux, name: str) -> None:
    tmux("send-keys", "-t", "chat", name)


def expected_words(rules, messages) -> set[str]:
    """Every word the chat writes for `messages`: the greeting, each message echoed, each reply (its
    pages rendered to the terminal's width, as the chat renders them)."""
    chat = Conversation(Session(rules))
    chat.width = COLUMNS - 1
    out = [chat.greeting()]
    for message in messages:
        out.append(app.echo(chat.prompt(), message))
        out.append(chat.handle(message).text)
    return set(" ".join(out).split())


def test_at_80_columns_a_new_user_is_answered_paged_and_no_word_is_cut(rules, tmp_path):
    z3 = str(layout_base("z3-dp2-fp32"))
    (tmp_path / "trace.log").write_text(trace())
    (tmp_path / "ls.txt").write_text(listing(z3))
    tmux = Tmux(COLUMNS, ROWS)
    env = f"env XDG_STATE_HOME={shlex.quote(str(tmp_path))} NO_COLOR=1 DS_ACCELERATOR=cpu"
    try:
        tmux.start(f"{env} {shlex.quote(sys.executable)} -m triage chat; echo \"[chat exited $?]\"; sleep 60", ROOT)
        tmux.wait_for("ds-triage>")
        # a question at the prompt, before any log: answered, not taken for log text (one Enter sends it)
        tmux.type(QUESTION)
        tmux.wait_for("Paste the failing job's log (or its traceback) first")
        tmux.type("help")
        tmux.wait_for("need no slash.")

        # the runbook page is taller than the screen: a screenful, then the pager's prompt
        tmux.type("/runbook DS-Z001")
        screen = wait_rows(tmux, "-- more (49 of ")
        assert screen[-1].startswith("-- more (49 of ") and not any(RUNBOOK_END in row for row in screen)
        total = int(screen[-1].split(" of ")[1].split()[0])
        key(tmux, "Space")  # the next page
        if total > 2 * (ROWS - 1):
            wait_rows(tmux, "-- more (98 of ")
            key(tmux, "q")
        else:
            wait_rows(tmux, RUNBOOK_END)
        # again: Enter shows one more line, q skips the rest and the prompt comes back
        tmux.type("/runbook DS-Z001")
        wait_rows(tmux, "-- more (49 of ")
        key(tmux, "Enter")
        wait_rows(tmux, "-- more (50 of ")
        key(tmux, "q")
        wait_rows(tmux, f"({total - 50} more lines not shown)")
        tmux.wait_for("ds-triage>")
        assert sum(RUNBOOK_END in row for row in rows(tmux)) == 1  # the second time, skipped

        # a pasted trace (bracketed, as a terminal pastes), then the pasted listing decides
        for name in ("trace", "ls"):
            tmux("load-buffer", "-b", name, str(tmp_path / f"{name}.{'log' if name == 'trace' else 'txt'}"))
        tmux("paste-buffer", "-p", "-d", "-b", "trace", "-t", "chat")
        paged(tmux, "Where is the checkpoint?")
        tmux("paste-buffer", "-p", "-d", "-b", "ls", "-t", "chat")
        paged(tmux, "DS-F001: open -> ruled out")
        tmux.type("/verify")
        screen = tmux.wait_for("Already answered by what you pasted")
        offered = screen.rsplit("ds-triage> /verify", 1)[1].split("Already answered", 1)[0]
        assert "] id" in offered and "ls -la" not in offered  # the listing is not offered again
        tmux.type("quit")
        tmux.wait_for("[chat exited 0]")

        shown = rows(tmux)
        (tmp_path / "screen.txt").write_text("\n".join(shown))
        assert max(len(row) for row in shown) <= COLUMNS
        messages = [QUESTION, "help", "/runbook DS-Z001", "/runbook DS-Z001", trace(), listing(z3), "/verify", "quit"]
        words = expected_words(rules, messages)
        long_words = [w for w in words if len(w) > 40]  # only a word longer than a row is broken (at a /)
        cut = [w for row in shown for w in row.split()
               if w not in words and not any(w in long for long in long_words)]
        chrome = {"[chat", "exited", "0]", "more", "lines", "not", f"({total - 50}", "shown)"}
        assert [w for w in cut if w not in chrome] == [], f"words cut at {COLUMNS} columns (screen in {tmp_path})"
    finally:
        tmux.kill()
