"""Issue 43's done-when, off a terminal: a pasted bare check_ckpt_list assertion (the corpus job's own
trace) gets one question; the real `cat latest; echo; ls -la ROOT TAG` of a ZeRO-3 checkpoint then
confirms DS-Z001 and rules out DS-F001 in the probe's own words. The same through the pure handler,
piped `ds-triage chat`, and `triage --evidence`; `collect` writes what they read."""

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.probe_checkpoints import layout_base
from triage.chat.conversation import Conversation
from triage.chat.session import Session

TAG = "global_step3"
CASE = ROOT / "corpus" / "cases" / "job-zero3-train-then-stage2-load.log"


@pytest.fixture(scope="module")
def z3():
    return str(layout_base("z3-dp2-fp32"))


def trace() -> str:
    """rank 0's traceback as the job printed it, from `Traceback` to the bare AssertionError."""
    lines = CASE.read_text().splitlines()
    end = next(i for i, line in enumerate(lines) if line == "[rank0]: AssertionError")
    start = max(i for i in range(end) if "Traceback (most recent call last)" in lines[i])
    return "\n".join(lines[start:end + 1]) + "\n"


def listing(z3: str) -> str:
    command = f"cat {z3}/latest; echo; ls -la {z3} {z3}/{TAG}"
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, check=True).stdout


def probe_words(z3: str) -> str:
    """The config probe's evidence line, with the checkpoint in hand (its tag dir and load dir given)."""
    out = subprocess.run([sys.executable, "-m", "triage", "triage", "--log", "-", "--ckpt", f"{z3}/{TAG}",
                          "--load-dir", z3, "--json"], input=trace(), capture_output=True, text=True, cwd=ROOT)
    data = json.loads(out.stdout)
    assert data["verdict"]["rule_id"] == "DS-Z001"
    return next(p for p in data["probes"] if p["name"] == "config")["evidence"][0]


def test_the_handler_asks_one_question_then_decides_on_the_pasted_listing(rules, z3):
    chat = Conversation(Session(rules), interactive=False)
    out = chat.handle(trace()).text
    assert out.count("To tell these causes apart") == 1 and "ls -la CKPT CKPT/TAG" in out
    assert "DS-F001" in out and "DS-Z001" in out
    out = chat.handle(listing(z3)).text
    assert "Verdict: zero_stage_mismatch [DS-Z001]" in out
    assert "DS-Z001: open -> confirmed" in out and "DS-F001: open -> ruled out" in out
    assert probe_words(z3) in out  # the probe's own words
    assert "To tell these causes apart" not in out  # decided: no question


def test_piped_chat_decides_the_same(z3):
    done = subprocess.run([sys.executable, "-m", "triage", "chat"], input=trace() + "\n" + listing(z3),
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "Verdict: zero_stage_mismatch [DS-Z001]" in done.stdout
    assert "DS-F001: open -> ruled out" in done.stdout and probe_words(z3) in done.stdout


def test_triage_evidence_gives_the_verdict_of_the_checkpoint_in_hand(z3, tmp_path):
    (tmp_path / "trace.log").write_text(trace())
    (tmp_path / "ls.txt").write_text(listing(z3))
    done = subprocess.run([sys.executable, "-m", "triage", "triage", "--log", str(tmp_path / "trace.log"),
                           "--evidence", str(tmp_path / "ls.txt"), "--json"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["verdict"]["rule_id"] == "DS-Z001" and data["verdict"]["status"] == "confirmed"
    status = {h["rule_id"]: (h["status"], h["evidence_used"]) for h in data["hypotheses"]}
    ls = f"the pasted ls -l output in {tmp_path / 'ls.txt'}"
    assert status["DS-F001"][0] == "refuted" and f"the pasted cat latest output in {tmp_path / 'ls.txt'}" in status["DS-F001"][1]
    assert status["DS-Z001"] == ("confirmed", [ls])
    config = next(p for p in data["probes"] if p["name"] == "config")["evidence"][0]
    assert config == probe_words(z3)


def test_collect_writes_what_triage_evidence_reads_and_redacts(z3, tmp_path):
    out = subprocess.run([sys.executable, "-m", "triage", "collect", z3], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    (tmp_path / "collected.txt").write_text(out.stdout)
    (tmp_path / "trace.log").write_text(trace())
    done = subprocess.run([sys.executable, "-m", "triage", "triage", "--log", str(tmp_path / "trace.log"),
                           "--evidence", str(tmp_path / "collected.txt"), "-q"], capture_output=True, text=True, cwd=ROOT)
    assert done.stdout.strip() == "confirmed zero_stage_mismatch [DS-Z001]"
    redacted = subprocess.run([sys.executable, "-m", "triage", "collect", z3, "--redact"], capture_output=True,
                              text=True, cwd=ROOT).stdout
    import pwd, os
    assert pwd.getpwuid(os.getuid()).pw_name not in redacted and str(layout_base("z3-dp2-fp32").parent) not in redacted


def test_collect_never_follows_a_symlink_out_of_the_root(tmp_path, z3):
    import shutil

    root = tmp_path / "ckpt"
    shutil.copytree(z3, root)
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "zero_pp_rank_9_mp_rank_00_model_states.pt").write_text("x")
    (root / "global_step9").symlink_to(outside)
    out = subprocess.run([sys.executable, "-m", "triage", "collect", str(root)], capture_output=True, text=True, cwd=ROOT)
    assert "zero_pp_rank_9" not in out.stdout and "global_step9 -> " in out.stdout


def test_a_run_commands_output_updates_the_ranking(rules, z3):
    from triage.chat.session import CommandRun

    def run(command):
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True)
        return CommandRun(command, done.returncode, done.stdout)

    chat = Conversation(Session(rules), interactive=False, run_command=run)
    chat.handle(trace())
    out = chat.run_now(f"ls -la {z3} {z3}/{TAG}").text
    assert "DS-Z001: open -> confirmed" in out and probe_words(z3) in out


def test_answering_the_stage_after_a_paste_says_what_changed(rules, z3):
    chat = Conversation(Session(rules), interactive=False)
    chat.handle(trace())
    tag_only = subprocess.run(["ls", "-la", f"{z3}/{TAG}"], capture_output=True, text=True, check=True).stdout
    out = chat.handle(f"$ ls -la {z3}/{TAG}\n" + tag_only).text
    assert "DS-Z001: open -> confirmed" not in out  # the tag alone: the load dir is not known
    out = chat.handle("/set stage 2").text
    assert "DS-Z001: open -> confirmed" in out


@pytest.mark.slow
def test_in_a_real_terminal_the_trace_gets_one_question_and_the_pasted_listing_decides(z3, tmp_path):
    import shlex

    from tests.test_chat_cli import Tmux

    (tmp_path / "trace.log").write_text(trace())
    (tmp_path / "ls.txt").write_text(listing(z3))
    tmux = Tmux()
    env = f"env XDG_STATE_HOME={shlex.quote(str(tmp_path))} NO_COLOR=1 DS_ACCELERATOR=cpu"
    try:
        tmux.start(f"{env} {shlex.quote(sys.executable)} -m triage chat; echo \"[chat exited $?]\"; sleep 60", ROOT)
        tmux.wait_for("ds-triage>")
        for name in ("trace", "ls"):
            tmux("load-buffer", "-b", name, str(tmp_path / f"{name}.{'log' if name == 'trace' else 'txt'}"))
        tmux("paste-buffer", "-p", "-d", "-b", "trace", "-t", "chat")  # bracketed, as a terminal pastes
        tmux.wait_for("Where is the checkpoint?")
        assert tmux.screen().count("To tell these causes apart") == 1
        tmux("paste-buffer", "-p", "-d", "-b", "ls", "-t", "chat")
        tmux.settle(quiet=1.0)
        tmux.type()  # Enter sends the paste
        screen = tmux.wait_for("DS-F001: open -> ruled out", deadline=120)
        assert "Verdict: zero_stage_mismatch [DS-Z001]" in screen and "DS-Z001: open -> confirmed" in screen
        assert "the bare assert in check_ckpt_list" in screen  # the probe's words
        assert screen.count("To tell these causes apart") == 1
    finally:
        tmux.kill()
