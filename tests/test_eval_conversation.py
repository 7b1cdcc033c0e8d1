"""`ds-triage eval --conversation` (issue 43, item 5) on a bounded real subset: corpus cases whose
checkpoints are rebuilt from the probe tests' cached baselines (tests/probe_checkpoints.py) or
unpacked from corpus/checkpoints, their real logs, and a scripted user who runs each asked command
for real on the checkpoint through /run's policy (triage/chat/readonly.py), never a shell."""

import pytest

from tests import probe_checkpoints as pc
from triage.eval import conversation
from triage.eval.conversation import ANSWERS, TOP1_GOAL, ConversationEval, Talk
from triage.eval.render import conversation as render
from triage.evidence.scripted import answerer

# Each covers one thing the measurement must get right.
SUBSET = {
    pc.ZERO3: "the log alone is wrong (the bare check_ckpt_list assertion reads as a missing file); "
              "the ls -la answer shows a ZeRO-3 save and confirms the stage cause",
    "zero3-dp2-tag-dir-unreadable": "wrong from the log; the listing, run as nobody (the job's user), "
                                    "is refused the tag dir (`/usr/bin/ls: cannot open directory`): permissions",
    "zero2-dp2-model-states-deleted": "right from the log, but its log is the ZeRO-3 case's text: ambiguous",
    "accelerate-pytorch-model-dir-unreadable": "kept, loaded as nobody: ls is refused the tag dir `latest` "
                                               "names (pytorch_model, no global_step): permissions, not a missing file",
    "job-zero2-dp2-saved-load-dp1-default-log-level": "its command is a quoted `bash -xc '...'`: the dir it loads "
                                                      "still found (the quote is not part of it)",
    "trainer-zero2-saved-stage3-resume": "kept; the log names no dir: CKPT is the Trainer's newest checkpoint-N, "
                                         "the dir its resume gives load_checkpoint (its output dir shows no tag)",
    "trainer-latest-deleted": "a kept (committed) Trainer checkpoint without `latest`: the listing names no "
                              "tag (the permission reading of such a paste raised TypeError)",
    pc.HEALTHY: "a healthy checkpoint: never diagnosed",
}


@pytest.fixture(scope="module")
def measured(rules) -> ConversationEval:
    # the session's traversable dir: the job's user (nobody) must reach the copies
    return conversation.run(set(SUBSET), work=pc.session_dir() / "conversation", baselines=pc.baselines(),
                            rules=rules, log=lambda line: None)


def test_the_subset_is_measured_with_its_figures_and_gates(measured):
    talks = {t.id: t for t in measured.talks}
    assert set(talks) == set(SUBSET) and not [t.error for t in measured.talks if t.error]
    zero3, unreadable = talks[pc.ZERO3], talks["zero3-dp2-tag-dir-unreadable"]
    assert (zero3.hard, zero3.answers, zero3.statuses[-1]) == ("wrong", ["missing_file", "zero_stage_mismatch"],
                                                               "confirmed")
    assert zero3.asked[0].startswith("cat ") and "ls -la" in zero3.asked[0]
    # as root the listing would show the tag's files; as nobody ls is refused, and that decides it
    assert (unreadable.hard, unreadable.answers, unreadable.statuses[-1]) == (
        "wrong", ["zero_stage_mismatch", "permission_denied"], "confirmed")
    assert talks["zero2-dp2-model-states-deleted"].hard == "same log"
    assert talks["trainer-latest-deleted"].source == "kept" and talks["trainer-latest-deleted"].right(ANSWERS)
    accelerate = talks["accelerate-pytorch-model-dir-unreadable"]
    assert (accelerate.source, accelerate.hard, accelerate.answers) == (
        "kept", "wrong", ["missing_file", "permission_denied"])
    trainer = talks["trainer-zero2-saved-stage3-resume"]
    assert "CKPT" in trainer.asked[0] and (trainer.answers, trainer.statuses[-1]) == (
        ["zero_stage_mismatch", "zero_stage_mismatch"], "confirmed")
    assert talks[pc.HEALTHY].answers == ["unknown"] and not talks[pc.HEALTHY].diagnosed
    hard = measured.failing(hard=True)
    assert {t.id for t in hard} == {pc.ZERO3, "zero3-dp2-tag-dir-unreadable", "zero2-dp2-model-states-deleted",
                                    "accelerate-pytorch-model-dir-unreadable"}
    assert measured.top1(hard) == [1, 4, 4]  # after 0, 1, 2 answers
    assert [(g.name, g.passed) for g in measured.gates] == [("conversation_top1", True), ("conversation_healthy", True)]
    data = measured.to_json()
    assert data["wrong_or_ambiguous"]["top1"] == [1, 4, 4] and data["healthy_diagnosed"] == 0
    assert data["wrong_or_ambiguous"]["mean_questions"] == 1.0
    shown = "\n".join(render(measured))
    assert "where the log alone is wrong or ambiguous: top-1 after 0, 1, 2 answers: 1/4 (25.0%), 4/4 (100.0%), " \
           "4/4 (100.0%)" in shown and "healthy diagnosed: 0 of 1" in shown


def _talk(expected, *answers, hard="wrong") -> Talk:
    return Talk("c", "rebuilt", expected, list(answers), hard=hard if expected else "")


def test_the_gates_are_the_issues_goal():
    assert (TOP1_GOAL, ANSWERS) == (0.97, 2)
    fixed = [_talk("missing_file", "zero_stage_mismatch", "missing_file") for _ in range(97)]
    still = [_talk("missing_file", "zero_stage_mismatch") for _ in range(3)]
    assert all(g.passed for g in ConversationEval(fixed + still, 1.0).gates)  # 97/100
    assert not ConversationEval(fixed[:96] + still + still[:1], 1.0).gates[0].passed  # 96/100
    # a healthy checkpoint given a cause, or whose conversation could not be held, fails the other gate
    for healthy in (_talk(None, "unknown", "missing_file"), Talk("h", "kept", None, error="not made: ...")):
        assert [g.passed for g in ConversationEval(fixed + [healthy], 1.0).gates] == [True, False]
    assert not ConversationEval([], 1.0).gates[0].passed  # nothing measured is no pass


def test_the_scripted_user_runs_only_what_run_would(tmp_path):
    root = pc.scenario(pc.ZERO3)
    before = pc.snapshot(root)
    run = answerer(str(root))
    listed = run(f"cat {root}/latest; echo; ls -la {root}")
    assert listed.startswith("global_step") and "zero_to_fp32.py" in listed
    assert run(f"head -c 64 {root}/global_step*/*_model_states.pt | head -c 10") == "==> " + str(root)[:6]
    outside = tmp_path / "x"
    outside.write_text("secret")
    for refused in ("pip show deepspeed torch", f"rm -rf {root}/latest", f"cat {outside}",
                    f"ls -la {root} | sort", f"find {root} -delete", "echo hi"):
        assert run(refused).startswith("not run: "), refused
    assert pc.snapshot(root) == before and outside.exists()


def test_the_conversation_goes_with_work_and_baselines_not_committed_logs(cli):
    proc = cli("eval", "--conversation", "--committed-logs")
    assert proc.returncode == 2 and b"--committed-logs" in proc.stderr
