"""`ds-triage chat` end to end: piped (the whole input one conversation, plain text) on real
corpus logs and a real faulted DeepSpeed checkpoint, compared with what `classify` and
`triage` say on the same inputs; and one run in a real terminal (tmux)."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from tests import probe_checkpoints as pc
from tests.conftest import CORPUS, ROOT

ZERO3_LOG = CORPUS / "cases" / "job-zero3-train-then-stage2-load.log"  # its save lines name ZeRO-3 shards: DS-Z001 first
CAUSE = re.compile(r"^\s+\d+\. (DS-[A-Z]\d{3}) (.+?) \(\d\.\d\d\): ", re.M)
NOT_CHECKPOINT = "not a checkpoint-loading failure"


@pytest.fixture
def run(cli):
    return lambda *args, stdin=None: cli(*args, stdin=stdin)


def chat_causes(out: str) -> list[tuple[str, str]]:
    """(rule id, category) of the first list of causes the chat printed."""
    first = out.split("Probed ", 1)[0]
    return [(rule_id, "unknown" if category == NOT_CHECKPOINT else category)
            for rule_id, category in CAUSE.findall(first)]


@pytest.mark.parametrize("name", ["zero3-saved-stage2-load-dp2", "tp2-saved-load-dp2", "negative-oom",
                                  "hf-zero2-dp2-load-output-dir", "zero2-dp2-optim-shard-truncated",
                                  "negative-store-timeout"])
def test_a_piped_trace_gets_the_same_ranked_causes_and_exit_code_as_classify(run, name):
    log = (CORPUS / "cases" / f"{name}.log").read_bytes()
    chat = run("chat", stdin=log)
    classify = run("classify", "--json", stdin=log)
    expected = [(h["rule_id"], h["category"]) for h in json.loads(classify.stdout)["hypotheses"]]
    assert chat.stderr == b""
    assert chat_causes(chat.stdout.decode()) == expected
    assert chat.returncode == classify.returncode
    assert "Where is the checkpoint?" not in chat.stdout.decode()  # piped: nothing is asked


@pytest.mark.slow
@pytest.mark.parametrize("case_id, verdict", [(pc.ZERO3, "Verdict: zero_stage_mismatch [DS-Z001]"),
                                              (pc.HEALTHY, "Verdict, likely but not confirmed on the checkpoint: "
                                                           "missing_file [DS-F001]")])
def test_with_ckpt_the_piped_chat_gives_the_triage_verdict(run, case_id, verdict):
    ckpt = pc.scenario(case_id)
    chat = run("chat", "--ckpt", ckpt, stdin=ZERO3_LOG.read_bytes())
    triage = run("triage", "--log", ZERO3_LOG, "--ckpt", ckpt, "--json")
    out = chat.stdout.decode()
    assert verdict in out and chat.returncode == triage.returncode
    statuses = {}
    for section, status in (("Confirmed:", "confirmed"), ("Ruled out:", "refuted"), ("Open:", "inconclusive")):
        if section in out:
            body = out.split(section, 1)[1].split("\n", 1)[1]
            body = body[:re.search(r"^\S", body, re.M).start()]
            statuses.update({rule_id: status for rule_id, _ in CAUSE.findall(body)})
    assert statuses == {h["rule_id"]: h["status"] for h in json.loads(triage.stdout)["hypotheses"]}


@pytest.mark.slow
def test_a_piped_conversation_runs_a_check_and_exports_the_incident(run, tmp_path):
    ckpt = pc.scenario(pc.ZERO3)
    report = tmp_path / "incident.md"
    script = f"/verify\n/run 6\nyes\n/run rm -rf {ckpt}\n/export {report}\n/quit\n".encode()
    before = pc.snapshot(ckpt)
    chat = run("chat", "--ckpt", ckpt, stdin=ZERO3_LOG.read_bytes() + script)
    out = chat.stdout.decode()
    assert chat.returncode == 0
    assert f"> /run 6\nRun `ls -la {ckpt}/global_step3`? It only reads. [y/N]\n> yes\n" in out
    assert "zero_pp_rank_1_mp_rank_00_model_states.pt" in out.split("> yes", 1)[1]
    assert "Not run: `rm` is not on the chat's list" in out
    assert pc.snapshot(ckpt) == before
    text = report.read_text()
    assert text.startswith("# Incident report: zero_stage_mismatch [DS-Z001]\n")
    assert "**zero_stage_mismatch** (DS-Z001)" in text and ">>372 | [rank0]: AssertionError" in text
    assert f"`ls -la {ckpt}/global_step3` (exit status 0):" in text
    assert "| completeness | confirmed |" in text


@pytest.mark.slow
def test_probe_without_a_log_is_the_probe_report(run):
    ckpt = pc.scenario("zero2-dp2-optim-shard-deleted")
    chat = run("chat", "--ckpt", ckpt, stdin=b"/probe\n")
    out = chat.stdout.decode()
    assert "summary: 1 probe(s) found a problem (missing_file)" in out
    assert "missing 1 of 2 optimizer shards: zero_pp_rank_1_mp_rank_00_optim_states.pt" in out
    assert chat.returncode == 0
    assert run("chat", "--ckpt", pc.scenario(pc.HEALTHY), stdin=b"/probe\n").returncode == 1


@pytest.mark.slow
def test_the_chat_probes_after_a_yes_and_repairs_only_after_a_yes_naming_what_it_writes(rules):
    from triage.chat.conversation import Conversation
    from triage.chat.session import Session

    ckpt = pc.copy_of(pc.ZERO3, "chat-repair")
    before = pc.snapshot(ckpt)
    chat = Conversation(Session(rules))
    chat.handle(ZERO3_LOG.read_text())
    assert f"Probe {ckpt} for these causes? It only reads. [Y/n]" in chat.handle(str(ckpt)).text
    assert chat.session.triage is None  # nothing probed before the yes
    out = chat.handle("").text  # Enter: yes
    assert "Verdict: zero_stage_mismatch [DS-Z001]" in out and chat.session.triage.confirmed
    written = ckpt.parent / f"{ckpt.name}-ds_config.json"
    out = chat.handle("/repair config").text
    assert f"$ ds-triage repair config {ckpt} --tag global_step3\n" in out and "dry run: nothing was written" in out
    assert out.rstrip().endswith(f"Apply it? It writes: {written} (new). [y/N]")
    assert "Not done." in chat.handle("no").text and not written.exists()
    chat.handle("/repair config")
    out = chat.handle("yes").text
    assert f"$ ds-triage repair config {ckpt} --tag global_step3 --apply --out {written}" in out
    assert json.loads(written.read_text())["zero_optimization"]["stage"] == 3
    assert pc.snapshot(ckpt) == before  # the checkpoint itself untouched
    assert [run.command.split()[:3] for run in chat.session.commands] == [["ds-triage", "repair", "config"]] * 3


@pytest.mark.parametrize("args, stdin, code, message", [
    ((), b"", 3, "ds-triage: error: <stdin> is empty"),
    ((), b"\x00\x01\x02\x03" * 1000, 3, "ds-triage: error: <stdin> does not look like a text log"),
    (("--ckpt", "/nonexistent/ckpt"), b"x\n", 3, "ds-triage: error: --ckpt /nonexistent/ckpt: no such file"),
    (("--config", "/nonexistent/ds.json"), b"x\n", 3, "ds-triage: error: --config: no such file"),
    (("--world-size", "0"), b"x\n", 2, "must be at least 1"),
])
def test_bad_input_is_one_line_and_a_documented_exit_code(run, args, stdin, code, message):
    proc = run("chat", *args, stdin=stdin)
    assert proc.returncode == code
    assert message in proc.stderr.decode() and "Traceback" not in proc.stderr.decode()


def test_chat_imports_neither_torch_nor_deepspeed(rule_cache):
    probe = ("import sys, triage.cli as c, triage.chat.app; c.main(['chat']); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'deepspeed')), file=sys.stderr)")
    with open(ZERO3_LOG, "rb") as log:
        proc = subprocess.run([sys.executable, "-c", probe], stdin=log, capture_output=True, text=True, cwd=ROOT,
                              env={**os.environ, "XDG_CACHE_HOME": rule_cache}, timeout=60)
    assert "1. DS-Z001 zero_stage_mismatch" in proc.stdout
    assert proc.stderr.splitlines()[-1] == "[]"


# ---------------------------------------------------------------------- a real terminal

class Tmux:
    """A private tmux server (its own socket): started here, killed here, nothing else touched."""

    def __init__(self, width=160, height=50):
        if shutil.which("tmux") is None:
            pytest.fail("tmux is needed for the real-terminal test of `ds-triage chat`: install it (apt-get install "
                        "tmux); this test does not skip")
        self.socket = f"ds-triage-chat-{uuid.uuid4().hex[:8]}"
        self.size = (width, height)

    def __call__(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], check=True, capture_output=True,
                              text=True, timeout=30).stdout

    def start(self, command: str, cwd) -> None:
        self("new-session", "-d", "-s", "chat", "-x", str(self.size[0]), "-y", str(self.size[1]), "-c", str(cwd),
             command)

    def start_chat(self, state_dir, env: str = "") -> None:
        """`ds-triage chat` in the repository, its history under `state_dir`, up to its prompt."""
        self.start(f"env XDG_STATE_HOME={shlex.quote(str(state_dir))} {env} {shlex.quote(sys.executable)} "
                   "-m triage chat; sleep 60", ROOT)
        self.wait_for("ds-triage>")

    def type(self, text: str = "") -> None:
        """Type `text` then Enter, a person's moment apart: an Enter handled right behind other
        keys is a newline of a paste (triage/chat/app.py, BURST_SECONDS)."""
        if text:
            self("send-keys", "-t", "chat", "-l", text)
        time.sleep(0.2)
        self("send-keys", "-t", "chat", "Enter")

    def settle(self, quiet: float = 0.5, deadline: float = 30.0) -> None:
        """Wait until the screen stops changing: the app has handled every key sent so far."""
        end, last = time.monotonic() + deadline, None
        while time.monotonic() < end:
            screen = self.screen()
            if screen == last:
                return
            last = screen
            time.sleep(quiet)

    def screen(self) -> str:
        return self("capture-pane", "-p", "-J", "-S", "-", "-t", "chat")

    def wait_for(self, text: str, deadline: float = 30.0) -> str:
        end = time.monotonic() + deadline
        while True:
            screen = self.screen()
            if text in screen:
                return screen
            if time.monotonic() > end:
                raise AssertionError(f"{text!r} not on the screen after {deadline} s; the screen:\n{screen}")
            time.sleep(0.1)

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)


@pytest.mark.slow
def test_in_a_real_terminal_a_pasted_trace_and_one_answer_give_the_verdict(tmp_path):
    ckpt = pc.scenario(pc.ZERO3)
    tmux = Tmux()
    env = f"env XDG_STATE_HOME={shlex.quote(str(tmp_path))} NO_COLOR=1 DS_ACCELERATOR=cpu"
    command = f"{env} {shlex.quote(sys.executable)} -m triage chat; echo \"[chat exited $?]\"; sleep 60"
    try:
        tmux.start(command, ROOT)
        tmux.wait_for("ds-triage>")  # capture-pane drops trailing spaces
        tmux("load-buffer", "-b", "trace", str(ZERO3_LOG))
        tmux("paste-buffer", "-p", "-d", "-b", "trace", "-t", "chat")  # -p: bracketed, as a terminal pastes
        lines = len(ZERO3_LOG.read_text().rstrip("\n").splitlines())
        tmux.wait_for(f"[{lines} lines pasted:")
        tmux.wait_for("Where is the checkpoint?")
        tmux.type(str(ckpt))
        tmux.wait_for("It only reads. [Y/n]")
        tmux.type()
        screen = tmux.wait_for("Next: /fix")
        (tmp_path / "screen.txt").write_text(screen)
        assert "\x1b[" not in tmux("capture-pane", "-p", "-e", "-t", "chat")  # NO_COLOR: no colour
        assert "1. DS-Z001 zero_stage_mismatch (0.76)" in screen
        assert f"Probed {ckpt} (tag global_step3): saved ZeRO-3, dp 2, no bf16" in screen
        assert "Verdict: zero_stage_mismatch [DS-Z001]" in screen
        assert "confirmed: saved with ZeRO-3, loading with stage 2" in screen
        ruled_out = screen.split("Ruled out:", 1)[1]
        assert "2. DS-F001 missing_file" in ruled_out and "3. DS-A001 permission_denied" in ruled_out
        tmux.type("/quit")
        tmux.wait_for("[chat exited 0]")
        assert (tmp_path / "ds-triage" / "chat_history").read_text().count("/quit") == 1
    finally:
        tmux.kill()


@pytest.mark.parametrize("env, coloured", [("", True), ("NO_COLOR=1", False), ("TERM=dumb", False)])
def test_colours_follow_no_color_and_a_dumb_terminal(tmp_path, env, coloured):
    tmux = Tmux(height=100)  # the whole runbook page on one screen, not paged
    try:
        tmux.start_chat(tmp_path, env)
        tmux.type("/runbook DS-Z001")
        tmux.wait_for("HOW TO VERIFY")
        dim = "\x1b[2mFull page with the signature and examples"  # the page's last line, dimmed
        assert "Full page with the signature and examples" in tmux.screen()
        assert (dim in tmux("capture-pane", "-p", "-e", "-t", "chat")) is coloured
    finally:
        tmux.kill()


def test_in_a_real_terminal_a_paste_without_bracketed_paste_is_one_message(tmp_path):
    """tmux's paste-buffer without -p types the trace as keys, as a terminal without bracketed
    paste does: the chained trace's blank lines must not cut it into several messages."""
    chained = ROOT / "corpus" / "cases" / "ds_to_universal-zero2-dp2-missing-shard.log"
    tmux = Tmux()
    try:
        tmux.start_chat(tmp_path, "NO_COLOR=1")
        tmux("load-buffer", "-b", "trace", str(chained))
        tmux("paste-buffer", "-d", "-b", "trace", "-t", "chat")  # no -p: keys, not a bracketed paste
        tmux.wait_for("is invalid for input of size 516")
        # every pasted key handled (a second without a change: the suite runs beside real DeepSpeed
        # loads, and a loaded machine draws late): the person's Enter comes after the paste
        tmux.settle(quiet=1.0)
        tmux.type()
        # a hang detector, not a speed goal: at load 8 the answer took over 60 s
        screen = tmux.wait_for("Likely causes", deadline=180)
        assert screen.count("Likely causes") == 1 and "Unknown command" not in screen
        assert "That does not work" not in screen and "Please answer" not in screen
    finally:
        tmux.kill()
