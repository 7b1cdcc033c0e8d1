"""`/run` cannot write (issue 40, finding 10).

The chat said "It only reads" and then ran, under /bin/sh, commands that delete, write and execute:
the shell's own expansions slipped past the check on the text (`find ... -delete$9`,
`uniq IN${IFS}OUT`, `sort $9-o`), and `python3 -c` code reached around the check on its AST
(`zipfile.os.execl`, importlib, `open(**{'mode': 'w'})`, `zipfile.shutil.rmtree`). Now no shell
runs, programs and options are on an allow-list, and no interpreter runs the user's text.

Every command here is driven through the chat's pure handler as a person would type it, then
answered "yes" if the chat asked; each refused one must create no marker file, delete none, and
start no process (an audit hook sees every subprocess.Popen of this process). The allowed ones run
on a copy of a real DeepSpeed checkpoint, and their output is the program's real output.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys

import pytest

from tests import probe_checkpoints as pc
from tests.conftest import corpus_log
from tests.hostile.payloads import TAG, copy_baseline
from triage.chat import readonly, run_policy
from triage.chat.conversation import Conversation
from triage.chat.session import Session
from triage.classify.commands import render

SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "busybox"}
_spawns: list[list[list[str]]] = []


def _hook(event: str, args: tuple) -> None:
    if event == "subprocess.Popen" and _spawns:
        _spawns[-1].append([os.fsdecode(a) for a in args[1]] if isinstance(args[1], (list, tuple)) else [args[1]])


sys.addaudithook(_hook)  # a hook stays for the process: it records only inside spawned()


@contextlib.contextmanager
def spawned():
    """The argv of every process the block started."""
    seen: list[list[str]] = []
    _spawns.append(seen)
    try:
        yield seen
    finally:
        _spawns.remove(seen)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return copy_baseline("z2-dp2-fp32", tmp_path_factory.mktemp("chat-run") / "ckpt")


@pytest.fixture
def chat(rules, ckpt):
    return Conversation(Session(rules, given={"ckpt": str(ckpt)}))


@pytest.fixture
def marks(tmp_path):
    """made: what a writing command would create; keep, keepdir: what a deleting one would remove."""
    (tmp_path / "keep").write_text("keep me\n")
    (tmp_path / "keepdir").mkdir()
    return {"made": tmp_path / "made", "keep": tmp_path / "keep", "keepdir": tmp_path / "keepdir"}


def run_in_chat(chat, command: str):
    """/run COMMAND, then "yes" if the chat asks: (the first reply, the argv of what it started)."""
    with spawned() as started:
        first = chat.handle(f"/run {command}").text
        if chat.pending is not None:
            chat.handle("yes")
    return first, started


def assert_refused(chat, ckpt, marks, template: str) -> str:
    before = pc.snapshot(ckpt)
    command = template.format(ckpt=ckpt, **marks)
    first, started = run_in_chat(chat, command)
    assert not marks["made"].exists() and marks["keep"].exists() and marks["keepdir"].exists(), started
    assert pc.snapshot(ckpt) == before, started
    assert started == [], started
    assert first.startswith("Not run: ") and first.count("\n") == 1, first  # one line: what and why
    return first


# The commands of the issue, each of which wrote, deleted or ran a program past the old check.
ISSUE = [
    "find {ckpt} -name latest -delete$9",  # the shell made it -delete: the copy's `latest` was gone
    "find {keep.parent} -name keep -delete$9",
    "uniq {ckpt}/latest${{IFS}}{made}",
    "sort $9-o {made} {ckpt}/latest",
    "python3 -c \"import zipfile; zipfile.os.execl('/usr/bin/touch', 'touch', '{made}')\"",
    "python3 -c \"import importlib.util as u; m = u.find_spec('os').loader.load_module('os'); "
    "m.execl('/usr/bin/touch', 'touch', '{made}')\"",
    "python3 -c \"open(**{{'file': '{made}', 'mode': 'w'}}).write('x')\"",
    "python3 -c \"import zipfile; zipfile.shutil.rmtree('{keepdir}')\"",
]


@pytest.mark.parametrize("template", ISSUE)
def test_the_issues_commands_are_refused_and_not_run(chat, ckpt, marks, template):
    assert_refused(chat, ckpt, marks, template)


INTERPRETERS = [
    "python -c \"open('{made}', 'w')\"", "python3 -c \"open('{made}', 'w')\"", "python3.11 -c \"open('{made}', 'w')\"",
    "python3 -m zipfile -c {made} {ckpt}/latest", "perl -e \"open(F, '>{made}')\"",
    "ruby -e \"File.write('{made}', '')\"",
    "sh -c \"touch {made}\"", "bash -c \"touch {made}\"", "dash -c \"touch {made}\"", "env touch {made}",
    "xargs touch {made}", "awk 'BEGIN {{ printf \"\" > \"{made}\" }}'", "sed -n 'w {made}' {ckpt}/latest",
    "busybox touch {made}", "timeout 5 touch {made}", "nice touch {made}", "nohup touch {made}",
    "node -e \"require('fs').writeFileSync('{made}', '')\"", "git -C {ckpt} init",
]


@pytest.mark.parametrize("template", INTERPRETERS)
def test_every_interpreter_and_launcher_is_refused(chat, ckpt, marks, template):
    first = assert_refused(chat, ckpt, marks, template)
    assert "is not on the chat's list of read-only programs" in first


FIND_ACTIONS = ["-delete", "-exec rm {keep} \\;", "-execdir rm {keep} +", "-ok rm {keep} \\;",
                "-okdir rm {keep} \\;", "-fprint {made}", "-fprint0 {made}", "-fprintf {made} %p", "-fls {made}"]


@pytest.mark.parametrize("action", FIND_ACTIONS)
def test_find_actions_that_delete_write_or_run_are_refused(chat, ckpt, marks, action):
    first = assert_refused(chat, ckpt, marks, "find {keep.parent} -name keep " + action)
    assert f"find {action.split()[0]} " in first


WRITERS = [
    "sort -o {made} {ckpt}/latest", "sort --output={made} {ckpt}/latest", "sort --output {made} {ckpt}/latest",
    "sort --out={made} {ckpt}/latest", "sort -uo{made} {ckpt}/latest", "uniq {ckpt}/latest {made}",
    "uniq -c -- {ckpt}/latest {made}", "tee {made}", "dd if={ckpt}/latest of={made}", "cp {ckpt}/latest {made}",
    "mv {keep} {made}", "rm {keep}", "rm -r {keepdir}", "ln -s {ckpt} {made}", "touch {made}",
    "truncate -s 0 {ckpt}/latest",
]


@pytest.mark.parametrize("template", WRITERS)
def test_sort_o_uniq_two_operands_tee_and_writers_are_refused(chat, ckpt, marks, template):
    assert_refused(chat, ckpt, marks, template)


SHELL_SYNTAX = {
    "redirection": ["cat {ckpt}/latest > {made}", "cat {ckpt}/latest >> {made}", "ls {ckpt} 2>{made}",
                    "ls {ckpt} >|{made}", "ls {ckpt} &>{made}", "cat < {ckpt}/latest", "cat {ckpt}/latest>{made}"],
    "expansion": ["ls $HOME", "ls ${{HOME}}", "ls \"$HOME\"", "ls {ckpt}/latest$9", "touch$IFS{made}",
                  "ls {{{ckpt},{made}}}", "ls ~"],
    "backticks": ["ls `touch {made}`", "ls \"`touch {made}`\"", "ls $(touch {made})", "ls \"$(touch {made})\""],
    "semicolon": ["ls {ckpt}; touch {made}", "ls {ckpt};touch {made}", "ls {ckpt} ; rm {keep}"],
    "pipe": ["ls {ckpt} | tee {made}", "cat {ckpt}/latest|tee {made}"],
    "and-or": ["ls {ckpt} && touch {made}", "ls /nonexistent || touch {made}", "touch {made} &"],
    "subshell": ["(touch {made})", "ls {ckpt} (touch {made})"],
}


@pytest.mark.parametrize("template", [t for group in SHELL_SYNTAX.values() for t in group])
def test_shell_syntax_is_refused_not_interpreted(chat, ckpt, marks, template):
    first = assert_refused(chat, ckpt, marks, template)
    assert "only a shell acts on" in first


@pytest.mark.parametrize("separator", ["\n", "\r", "\r\n"])
def test_a_second_line_is_refused(chat, ckpt, marks, separator):
    command = f"ls {ckpt}{separator}touch {marks['made']}"
    with spawned() as started:
        assert "spans lines" in readonly.check(command, readonly.Context.of(chat.session))
        assert readonly.run(command, readonly.Context.of(chat.session)).returncode == 126
        chat.handle(f"/run {command}")  # not a one-line command: the chat takes it as more log
        assert chat.pending is None or not chat.pending.text.startswith("Run ")
    assert started == [] and not marks["made"].exists()


@pytest.mark.parametrize("command", ["ls 'a", 'ls "a', "ls a\\", "ls \x00", "(", ";", "|", "*", "~", "#x", "python",
                                     "python -c", "ds-triage", "ds-triage rules", "find -delete", "-x", "'' x"])
def test_a_malformed_command_gets_one_line_saying_why(chat, command):
    with spawned() as started:
        first = chat.handle(f"/run {command}").text
    assert first.startswith("Not run: ") and first.count("\n") == 1 and started == [], first


def _output(chat, command: str):
    first, started = run_in_chat(chat, command)
    assert "It only reads. [y/N]" in first, first
    assert len(started) == 1 and os.path.basename(started[0][0]) not in SHELLS, started
    return chat.session.commands[-1], started[0]


def test_allowed_commands_run_on_a_real_checkpoint_with_their_real_output(chat, ckpt):
    before = pc.snapshot(ckpt)
    latest = (ckpt / "latest").read_text()
    run, argv = _output(chat, f"cat {ckpt}/latest")
    assert (run.returncode, run.output) == (0, latest) and argv == ["/usr/bin/cat", f"{ckpt}/latest"]
    run, _ = _output(chat, f"ls -la {ckpt}/{TAG}")
    assert run.returncode == 0 and all(p.name in run.output for p in (ckpt / TAG).iterdir())
    run, _ = _output(chat, f"stat -c '%s %n' {ckpt}/latest")
    assert run.output == f"{len(latest.encode())} {ckpt}/latest\n"
    run, argv = _output(chat, f"head -c 2 {ckpt}/{TAG}/*.pt")  # the glob, expanded by the chat inside the root
    shards = sorted(str(p) for p in (ckpt / TAG).glob("*.pt"))
    assert argv[3:] == shards and run.output.count("==> ") == len(shards) and "PK" in run.output
    run, _ = _output(chat, f"sha256sum {ckpt}/latest")
    assert run.output.split()[0] == hashlib.sha256(latest.encode()).hexdigest()
    run, _ = _output(chat, f"find {ckpt} -maxdepth 1 -name latest -type f")
    assert run.output == f"{ckpt}/latest\n"
    assert _output(chat, f"df -P {ckpt}")[0].output.startswith("Filesystem")
    for command in ("id", "whoami", f"du -s {ckpt}/{TAG}", f"namei -l {ckpt}/{TAG}", f"findmnt -T {ckpt} -o TARGET",
                    f"file {ckpt}/latest"):
        run, argv = _output(chat, command)
        real = subprocess.run(argv, capture_output=True, text=True,
                              env={"PATH": readonly.SAFE_PATH, "LC_ALL": "C.UTF-8"})
        assert (run.returncode, run.output) == (0, real.stdout + real.stderr), command
    run, argv = _output(chat, f"ds-triage probe {ckpt}")  # ds-triage's own module, its own interpreter
    assert argv[:2] == [sys.executable, "-I"] and run.returncode == 0 and "summary: nothing wrong found" in run.output
    run, argv = _output(chat, f"python -m triage.probe.safe_pickle --config {ckpt}/{TAG}/mp_rank_00_model_states.pt")
    assert argv[:2] == [sys.executable, "-I"] and json.loads(run.output)["zero_optimization"]["stage"] == 2
    assert pc.snapshot(ckpt) == before


def _rule_commands(rules, facts: dict) -> list[str]:
    return sorted({render(step["command"], facts) for rule in rules.rules for step in rule.data.get("verify", [])})


def test_every_rule_verify_command_runs_without_a_shell_or_is_refused_with_a_reason(rules, ckpt, tmp_path):
    config = tmp_path / "ds_config.json"  # the ds_config this checkpoint was saved with, read safely
    from triage.probe.safe_pickle import read_shard

    config.write_text(json.dumps(read_shard(str(ckpt / TAG / "mp_rank_00_model_states.pt")).ds_config))
    facts = {"ckpt": str(ckpt), "tag": TAG, "config": str(config)}
    commands = _rule_commands(rules, facts)
    ctx = readonly.Context(str(ckpt), str(config), frozenset(commands))
    assert len(commands) > 90
    programs = set(run_policy.PROGRAMS) | {"find", "ds-triage"}
    before = pc.snapshot(ckpt)
    for command in commands:
        found = readonly.plan(command, ctx)
        if isinstance(found, str):
            assert found and "\n" not in found, command
            continue
        head = found.argv[0]
        if head == sys.executable:  # ds-triage's own module, or a rule's own python check, isolated
            assert found.argv[1] == "-I" and command.startswith(("python ", "ds-triage ")), command
            assert "torch.load" not in command and "environ" not in command, command
        else:
            assert os.path.dirname(head) in readonly.SAFE_PATH.split(":") and os.path.basename(head) in programs
        if "import torch" in command or "import deepspeed" in command:
            continue  # runs too (seconds to import): the version checks; the rest is run here
        with spawned() as started:
            run = readonly.run(command, ctx)
        assert started == [found.argv] and run.returncode not in (None, 126), (command, run.output)
    assert pc.snapshot(ckpt) == before
    read_only = [c for c in commands if c.split()[0] in programs and not set(c) & set("|;&<>$`")]
    refused = {c: why for c in read_only if (why := readonly.check(c, ctx)) and "is not installed here" not in why}
    assert refused == {}, refused  # the rules' plainly read-only steps still run from the chat (nvidia-smi: no GPU)


def test_every_step_the_chat_offers_for_a_real_log_and_checkpoint_runs_or_is_refused(rules):
    """The ZeRO-3 corpus log against its own real checkpoint: /run N for every N, answered yes."""
    ckpt = pc.scenario(pc.ZERO3)
    chat = Conversation(Session(rules, given={"ckpt": str(ckpt)}), interactive=False)
    chat.handle(corpus_log("cases/job-zero3-train-then-stage2-load.log"))
    steps = chat.session.steps()
    assert len(steps) >= 5
    before = pc.snapshot(ckpt)
    ran = 0
    for step in steps:
        first, started = run_in_chat(chat, str(step.number))
        if first.startswith("Not run: "):
            assert started == [] and first.splitlines()[1] == f"To run it yourself: {step.command}"
            continue
        assert len(started) == 1 and os.path.basename(started[0][0]) not in SHELLS, (step.command, started)
        run = chat.session.commands[-1]
        assert run.command == step.command and run.returncode is not None and "not run:" not in run.output
        ran += 1
    assert ran >= 3 and pc.snapshot(ckpt) == before
