"""How the verifying load's outcome is read: torchrun's exit code and what each rank wrote."""

from triage.repair.plan import LoadSpec
from triage.repair.real_load import _result

SPEC = LoadSpec(mode="resume", load_dir="/ckpt", tag=None, world_size=2, config={}, config_source="test")
OK = {"ok": True, "load_path": "/ckpt/global_step3/mp_rank_00_model_states.pt", "global_steps": 3,
      "checksum": 1.5, "step_loss": 2.0, "notes": []}


def test_a_rank_dying_at_teardown_after_every_rank_reported_success_is_a_pass_with_a_note():
    result = _result(SPEC, "torchrun ...", 4.5, -6, "", [OK, OK], 60)
    assert result.ok and result.global_steps == 3
    assert result.notes == ["every rank reported success, then torchrun exited -6 (a rank died at teardown)"]


def test_a_missing_report_or_a_failed_rank_is_a_failure():
    assert not _result(SPEC, "torchrun ...", 4.5, -6, "", [OK], 60).ok  # one rank never reported
    failed = {"ok": False, "error": "AssertionError (at state_dict_factory.py:168 in check_ckpt_list)"}
    result = _result(SPEC, "torchrun ...", 4.5, 1, "", [OK, failed], 60)
    assert not result.ok and result.detail == failed["error"]
    assert not _result(SPEC, "torchrun ...", 60, "timeout", "", [OK, OK], 60).ok
