"""`ds-triage chat`'s prompt_toolkit layer, driven as prompt_toolkit's own tests do: a real
PromptSession on create_pipe_input() / DummyOutput(), fed keystrokes (a bracketed paste of a
real corpus trace, typed lines, Esc-Enter, Ctrl-C, Ctrl-D). Plus completion and the history
file."""

import os
import threading
import time
from pathlib import Path

from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.history import InMemoryHistory
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from tests.conftest import corpus_log
from triage.chat import app, pager
from triage.chat.conversation import Conversation
from triage.chat.session import Session

PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
ENTER, ESC_ENTER, CTRL_C, CTRL_D = "\r", "\x1b\r", "\x03", "\x04"
TRACE = "cases/job-zero3-train-then-stage2-load.log"  # its save lines name ZeRO-3 shards: DS-Z001 first


class Recorder(Conversation):
    """The real conversation, keeping every message it was handed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.messages = []

    def handle(self, message):
        self.messages.append(message)
        return super().handle(message)


def typing():
    """A clock for keys typed by hand: a second between two keys. The pipe hands the app every
    key at once, which the real clock (a paste's pace) would take for a paste."""
    now = 0.0

    def clock():
        nonlocal now
        now += 1.0
        return now

    return clock


def drive(rules, *keys, history=None, clock=None, later=(), paged=False):
    """Run the chat on `keys`; then each `(ready, key)` of `later` is typed once `ready(session)`
    holds and the app has had a moment's rest (what a person's key after a paste looks like)."""
    conversation = Recorder(Session(rules))
    written = []
    with create_pipe_input() as pipe:
        for chunk in keys:
            pipe.send_text(chunk)
        session = app.prompt_session(conversation, history=history, input=pipe, output=DummyOutput(),
                                     clock=clock or typing(), queued_is_paste=clock is not None)

        finished = threading.Event()

        def type_later():
            for ready, key in later:
                deadline = time.monotonic() + 60
                while not ready(session) and time.monotonic() < deadline:
                    time.sleep(0.02)
                time.sleep(0.2)
                pipe.send_text(key)
            # keys that did not end the session (a Ctrl-D landing on a non-empty prompt): end it, so
            # the test fails on what the chat did instead of hanging the suite
            if not finished.wait(60):
                stuck.append(session.default_buffer.text[-200:])
                session.app.loop.call_soon_threadsafe(lambda: session.app.exit(exception=EOFError()))

        stuck = []
        threading.Thread(target=type_later, daemon=True).start()
        shown = pager.for_session(session, written.append) if paged else None  # DummyOutput: 40 x 80
        code = app.run_app(conversation, session, written.append, pager=shown)
        finished.set()
    assert not stuck, f"the keys did not end the session; the prompt still held {stuck[0]!r}"
    return conversation, "".join(written), code


def test_a_bracketed_paste_is_one_message_and_gets_the_ranked_causes(rules):
    trace = corpus_log(TRACE)
    chat, out, code = drive(rules, PASTE_START + trace + PASTE_END, CTRL_D)
    assert code == 0 and len(chat.messages) == 1
    assert chat.messages[0] == trace.replace("\r\n", "\n")
    assert f"ds-triage> [{len(trace.rstrip(chr(10)).splitlines())} lines pasted:" in out  # echoed as one line
    assert "1. DS-Z001 zero_stage_mismatch (0.76)" in out
    assert out.rstrip().endswith("(or 'skip')")  # and the next question


def test_enter_sends_at_every_prompt_and_esc_enter_starts_a_new_line(rules):
    """Enter sends the same way at the main prompt (a question, a log line), at a question
    (checkpoint>) and at a yes/no; Esc-Enter (Alt-Enter) is how a typed message gets a second line."""
    chat, out, _ = drive(rules, "what should I check first?", ENTER,
                         "RuntimeError: first", ESC_ENTER, "second line", ENTER,
                         PASTE_START + corpus_log(TRACE) + PASTE_END, "what now", ENTER, "skip", ENTER,
                         f"/export {os.devnull}", ENTER, "no", ENTER, CTRL_D)
    assert chat.messages == ["what should I check first?", "RuntimeError: first\nsecond line",
                             corpus_log(TRACE), "what now", "skip", f"/export {os.devnull}", "no"]
    assert "Paste the failing job's log (or its traceback) first" in out  # the question, answered
    assert "What to check first:" in out and "Skipped the checkpoint." in out
    assert "Replace it with the incident report? [y/N]" in out and "Not done." in out


def test_a_one_line_command_or_answer_ends_with_enter(rules):
    chat, out, _ = drive(rules, PASTE_START + corpus_log(TRACE) + PASTE_END, "skip", ENTER, "/why 1", ENTER, CTRL_D)
    assert chat.messages[1:] == ["skip", "/why 1"]
    assert "Skipped the checkpoint." in out and "line 372: AssertionError" in out


def test_a_paste_without_bracketed_paste_is_one_message_not_answers(rules):
    """A terminal without bracketed paste sends a chained trace as keys, blank lines and all;
    at the pace of a paste (the real clock) none of its Enters sends, even at a question."""
    first = corpus_log(TRACE)
    chained = corpus_log("cases/ds_to_universal-zero2-dp2-missing-shard.log")
    end = chained.rstrip("\n").splitlines()[-1]
    # the paste's last key, its final Enter, handled too: under load the app can lag behind the
    # pipe by more than the rest before the typed Enter, which would then arrive with it, queued
    pasted = lambda session: session.default_buffer.text.endswith(end + "\n")  # noqa: E731
    sent = lambda session: not session.default_buffer.text  # noqa: E731
    chat, out, _ = drive(rules, PASTE_START + first + PASTE_END, chained.replace("\n", "\r"),
                         clock=time.monotonic, later=((pasted, ENTER), (sent, CTRL_D)))
    assert len(chat.messages) == 2, chat.messages[1:3]  # the paste, then the whole chained trace
    assert chat.messages[1].strip() == chained.strip()
    assert "no such file or directory" not in out and "That does not work" not in out


def test_a_log_line_at_a_question_is_more_log_not_an_answer(rules):
    chat, out, _ = drive(rules, PASTE_START + corpus_log(TRACE) + PASTE_END,
                         "Traceback (most recent call last):", ENTER, CTRL_D)
    assert chat.pending is not None or "checkpoint" in out
    assert "That does not work" not in out and "no such file or directory" not in out


def test_ctrl_c_drops_the_input_and_the_session_goes_on_ctrl_d_leaves(rules):
    chat, out, code = drive(rules, "half a mess", CTRL_C, "/help", ENTER, CTRL_D, "/quit", ENTER)
    assert chat.messages == ["/help"] and code == 0
    assert "/export FILE" in out


def test_a_page_taller_than_the_screen_is_paged_space_enter_q(rules):
    """/runbook's ~100 lines on a 40-row screen: 39 rows, the pager's prompt, a page more on space,
    a line more on Enter; q skips the rest, and the next message is read as usual."""
    chat, out, _ = drive(rules, "/runbook DS-Z001", ENTER, " ", ENTER, "q", "/help", ENTER, CTRL_D, paged=True)
    assert chat.messages == ["/runbook DS-Z001", "/help"]  # the pager's keys were not messages
    page = out.split("ds-triage> /runbook DS-Z001\n", 1)[1].split("ds-triage> /help", 1)[0]
    rows = page.rstrip("\n").split("\n")
    assert len(rows) == 39 + 39 + 1 + 1 and max(len(row) for row in rows) <= 79
    assert rows[-1].startswith("(") and rows[-1].endswith(" more lines not shown)")
    assert "FIX" in rows and "Full page with the signature" not in page
    assert "Questions and the words help and quit need no slash." in out  # /help, after the pager


def test_quit_leaves(rules):
    chat, _, code = drive(rules, "/quit", ENTER, "/help", ENTER)
    assert chat.messages == ["/quit"] and code == 0


def completions(conversation, text):
    completer = app.ChatCompleter(conversation)
    return [c.text for c in completer.get_completions(Document(text), CompleteEvent(completion_requested=True))]


def test_completion_of_commands_facts_and_paths(rules, tmp_path):
    chat = Conversation(Session(rules))
    assert completions(chat, "/r") == ["/run", "/repair", "/rules", "/runbook", "/reset"]
    assert completions(chat, "/set c") == ["ckpt", "config"]
    (tmp_path / "global_step3").mkdir()
    assert completions(chat, f"/set ckpt {tmp_path}/glo") == ["bal_step3"]
    assert completions(chat, f"/export {tmp_path}/glo") == ["bal_step3"]
    assert completions(chat, f"{tmp_path}/glo") == []  # no path asked for: a message, not a path
    chat.handle(corpus_log(TRACE))
    assert chat.pending.fact == "ckpt"
    assert completions(chat, f"{tmp_path}/glo") == ["bal_step3"]  # the checkpoint question completes paths


def test_history_goes_to_the_xdg_state_dir(rules, tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    warnings = []
    history = app.open_history(warnings.append, env)
    drive(rules, "/rules zero_stage_mismatch", ENTER, CTRL_D, history=history)
    path = tmp_path / "state" / "ds-triage" / "chat_history"
    assert warnings == [] and "/rules zero_stage_mismatch" in path.read_text()
    default = Path(os.path.expanduser("~/.local/state/ds-triage/chat_history"))
    assert app.history_path({"XDG_STATE_HOME": "relative"}) == app.history_path({}) == default


def test_history_is_private_and_can_keep_no_pastes(rules, tmp_path):
    state = tmp_path / "state"
    path = state / "ds-triage" / "chat_history"
    path.parent.mkdir(parents=True)
    path.write_text("")
    path.chmod(0o644)  # as an older version left it
    trace = corpus_log(TRACE)
    history = app.open_history([].append, {"XDG_STATE_HOME": str(state), "DS_TRIAGE_CHAT_HISTORY": "commands"})
    drive(rules, PASTE_START + trace + PASTE_END, "/rules zero_stage_mismatch", ENTER, CTRL_D, history=history)
    assert path.stat().st_mode & 0o777 == 0o600
    kept = path.read_text()
    assert "/rules zero_stage_mismatch" in kept and trace.splitlines()[-1] not in kept
    # --history all (the default) keeps the paste; off keeps nothing on disk
    history = app.open_history([].append, {"XDG_STATE_HOME": str(state)})
    drive(rules, PASTE_START + trace + PASTE_END, CTRL_D, history=history)
    assert trace.splitlines()[-1] in path.read_text()
    fresh = tmp_path / "fresh"
    assert isinstance(app.open_history([].append, {"XDG_STATE_HOME": str(fresh)}, keep="off"), InMemoryHistory)
    assert not fresh.exists()
    app.open_history([].append, {"XDG_STATE_HOME": str(fresh)})
    assert (fresh / "ds-triage").stat().st_mode & 0o777 == 0o700
    assert (fresh / "ds-triage" / "chat_history").stat().st_mode & 0o777 == 0o600


def test_an_unusable_history_dir_is_a_warning_not_a_crash(rules, tmp_path):
    (tmp_path / "state").write_text("a file where the state dir should be\n")
    warnings = []
    history = app.open_history(warnings.append, {"XDG_STATE_HOME": str(tmp_path / "state")})
    assert isinstance(history, InMemoryHistory)
    assert len(warnings) == 1 and warnings[0].startswith("ds-triage: warning: no chat history")
    _, out, code = drive(rules, "/help", ENTER, CTRL_D, history=history)
    assert code == 0 and "/probe" in out


def test_a_history_file_that_turns_unwritable_warns_once(rules, tmp_path):
    warnings = []
    history = app.open_history(warnings.append, {"XDG_STATE_HOME": str(tmp_path)})
    path = tmp_path / "ds-triage" / "chat_history"
    path.unlink()
    path.mkdir()  # unwritable as a file for any user, root included
    drive(rules, "/help", ENTER, "/rules", ENTER, CTRL_D, history=history)
    assert len(warnings) == 1 and "cannot write the chat history" in warnings[0]


def test_an_enter_sends_unless_it_is_a_line_of_a_paste():
    now = [0.0]
    burst = app.Burst(lambda: now[0])
    burst.saw_key()
    now[0] = 0.005  # right behind the key before: a paste's own Enter
    assert app.paste_newline(burst, False, "first line")
    assert app.paste_newline(burst, True, "")  # keys queued behind it
    now[0] = 0.1  # a moment later, in a message typed (or Alt-Entered): the person sends
    assert not app.paste_newline(burst, False, "typed line")
    assert not app.paste_newline(burst, False, "typed\nwith Esc-Enter")
    burst.pasting = True  # the message has lines from a paste's keys: its next chunk came late
    assert app.paste_newline(burst, False, "pasted\nlines")
    now[0] = 1.0  # the person looked at the paste, then pressed Enter
    assert not app.paste_newline(burst, False, "pasted\nlines")


def test_bytes_still_unread_in_the_terminal_mark_an_enter_as_part_of_a_paste():
    # a paste arrives in 1 KiB reads: an Enter ending one read, with the rest of the paste still
    # unread, must not send however long the machine took between two keys
    read_end, write_end = os.pipe()
    try:
        terminal = type("Input", (), {"fileno": lambda self: read_end})()
        assert app.unread_input(terminal) is False
        os.write(write_end, b"more of the paste")
        assert app.unread_input(terminal) is True
        os.read(read_end, 100)
        assert app.unread_input(terminal) is False
        assert app.unread_input(object()) is False  # an input without a descriptor (DummyInput)
    finally:
        os.close(read_end)
        os.close(write_end)
