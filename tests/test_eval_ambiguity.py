"""Same log, different cause: the fingerprint on real corpus logs, the ceiling it implies."""

from tests.conftest import CORPUS
from triage.eval.ambiguity import fingerprint, same_log_groups, unreachable
from triage.eval.evaluate import Case, Guess, Outcome, evaluate


def printed(case_id: str) -> tuple[str, ...]:
    return fingerprint((CORPUS / "cases" / f"{case_id}.log").read_text(encoding="utf-8"), case_id)


def test_a_stage_change_and_a_deleted_file_print_the_same_log():
    # Two real runs: a ZeRO-3 checkpoint loaded with a stage-2 config, and a ZeRO-2 checkpoint
    # whose mp_rank_00_model_states.pt was deleted. Different causes, one text.
    assert printed("zero3-saved-stage2-load-dp2") == printed("zero2-dp2-model-states-deleted")


def test_the_fingerprint_keeps_what_tells_runs_apart():
    # the same assertion, but the engine was configured for stage 3: the config dump differs
    assert printed("zero3-saved-stage2-load-dp2") != printed("zero2-saved-stage3-load-dp2")
    # one rank's shard missing vs both: the second rank's traceback is a difference
    assert printed("zero2-dp2-optim-shard-deleted") != printed("zero3-dp2-optim-shard-deleted")


def test_only_ids_pids_addresses_timings_and_launcher_bookkeeping_are_ignored():
    base = "[rank0]: AssertionError\nobject at 0x7f00aa  pid: 41 took 0.52 s /data/case-a/global_step3\n"
    assert fingerprint(base, "case-a") == fingerprint(
        base.replace("0x7f00aa", "0x55ff01").replace("41", "977").replace("0.52", "3.1").replace("case-a", "case-b"),
        "case-b")
    assert fingerprint(base, "case-a") != fingerprint(base.replace("global_step3", "global_step4"), "case-a")
    launcher = "  exitcode  : -15 (pid: 12)\nSending process 9 closing signal SIGTERM\n"
    assert fingerprint(base + launcher, "case-a") == fingerprint(base, "case-a")


def test_groups_need_different_labels_and_the_ceiling_keeps_the_commonest():
    a, b = ("x",), ("y",)
    groups = same_log_groups([("1", "zero", a), ("2", "missing", a), ("3", "missing", a),
                              ("4", "zero", b), ("5", "zero", b), ("6", "corrupt", ("z",))])
    assert groups == [[("1", "zero"), ("2", "missing"), ("3", "missing")]]  # b: one label, no ambiguity
    assert unreachable(groups) == 1  # answer "missing" for that text: only "1" is lost


def test_evaluation_reports_the_ceiling_from_outcome_fingerprints():
    def outcome(case_id, expected, got, text):
        return Outcome(Case(case_id, f"cases/{case_id}.log", "failure", expected),
                       (Guess("DS-Z001", got, 0.8),), fingerprint=(text,))

    result = evaluate([outcome("a", "zero_stage_mismatch", "zero_stage_mismatch", "same"),
                       outcome("b", "missing_file", "zero_stage_mismatch", "same"),
                       outcome("c", "corrupt_file", "corrupt_file", "other")])
    assert result.top1_ceiling == 2 and result.overall.top1 == 2
    data = result.to_json()["same_log"]
    assert data == {"groups": [[{"id": "a", "expected": "zero_stage_mismatch"},
                                {"id": "b", "expected": "missing_file"}]],
                    "top1_ceiling": 2, "top1_ceiling_rate": 0.6667}
