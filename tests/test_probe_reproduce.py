"""`probe --reproduce` / `triage --reproduce`: DeepSpeed's own load of a real checkpoint under torchrun
(gloo, CPU), its output read back through the classifier, the checkpoint untouched."""

import json

import pytest

from tests import probe_checkpoints as pc
from tests.repair_support import FACTORY, ext_env
from tests.test_probe_cli import PROBE, TRIAGE, errors

pytestmark = pytest.mark.slow
STAGE2 = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 2}}


def reproduce(cli, command, *args):
    proc = cli(command, *map(str, args), "--reproduce", "--json", env=ext_env())
    data = json.loads(proc.stdout)
    assert errors(PROBE if command == "probe" else TRIAGE, data) == []
    return proc.returncode, data, next(p for p in data["probes"] if p["name"] == "reproduce")


def test_a_healthy_checkpoint_loads_with_the_saved_config_and_twin_model(cli):
    root = pc.scenario(pc.HEALTHY)
    before = pc.snapshot(root)
    code, data, result = reproduce(cli, "probe", root)
    assert result["status"] == "refuted", result
    assert "passed on 2 rank(s)" in result["summary"] and "global step 3" in result["summary"]
    assert any("stand-in with the 10 saved parameters" in line for line in result["evidence"])
    assert code == 0 and data["findings"] == []
    assert pc.snapshot(root) == before


def test_a_zero3_checkpoint_with_a_stage2_config_fails_as_the_job_did(cli, tmp_path):
    root = pc.scenario(pc.ZERO3)
    before = pc.snapshot(root)
    config = tmp_path / "stage2.json"
    config.write_text(json.dumps(STAGE2))
    code, _, result = reproduce(cli, "probe", root, "--config", config, "--world-size", 2)
    assert result["status"] == "confirmed" and result["signals"] == ["load_fails"]
    assert "AssertionError" in result["evidence"][0] and "check_ckpt_list" in result["evidence"][0]
    # the bare assertion alone ranks DS-F001 first; the stage change is among the readings
    assert result["evidence"][1].startswith("its output reads as: ")
    assert "DS-Z001 zero_stage_mismatch" in result["evidence"][1]
    assert code == 1
    assert pc.snapshot(root) == before


def test_a_smaller_world_reproduces_the_dp_change_error(cli):
    """No --config: the saved ds_config, its train_batch_size dropped (it encodes the old world size)."""
    root = pc.scenario(pc.HEALTHY)
    _, _, result = reproduce(cli, "probe", root, "--world-size", 1)
    assert result["status"] == "confirmed"
    assert "ZeRORuntimeException" in result["evidence"][0] and "DP world size of 2" in result["evidence"][0]
    assert result["evidence"][1].startswith("its output reads as: DS-P001 parallelism_mismatch")
    assert any("the ds_config saved in the checkpoint" in line for line in result["evidence"])


def test_triage_reproduces_with_the_world_size_and_config_the_log_printed(cli):
    """The corpus log of a dp 2 -> 1 resume, and the checkpoint: the load is rerun as the log says it ran."""
    case = "zero2-dp2-saved-load-dp1"
    root = pc.scenario(case)
    code, data, result = reproduce(cli, "triage", "--log", pc.ROOT / "corpus" / "cases" / f"{case}.log",
                                   "--ckpt", root, "--model-factory", FACTORY)
    assert result["status"] == "confirmed"
    assert any("on 1 rank(s) (the log, line" in line for line in result["evidence"])
    assert any(f"model: --model-factory {FACTORY}" in line for line in result["evidence"])
    assert data["verdict"]["category"] == "parallelism_mismatch" and code == 0


@pytest.mark.parametrize("args, message", [(["--model-factory", "nocolon"], "expected MODULE:FUNCTION")])
def test_bad_model_factory_is_a_usage_error(cli, args, message):
    proc = cli("probe", pc.scenario(pc.HEALTHY), "--reproduce", *args)
    assert proc.returncode == 2 and message in proc.stderr.decode()
