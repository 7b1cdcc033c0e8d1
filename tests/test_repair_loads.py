"""Each repair turns a failing real DeepSpeed load into a passing one, and never touches the original.

Before: the load that fails, run by the same checker the repair verifies with
(triage/repair/load_check.py under torchrun, gloo on CPU), on a corpus scenario's checkpoint.
After: `ds-triage repair ACTION CKPT --apply --model-factory ...`, whose real load must pass and
restore the weights the training saved (the param checksum its log printed).
"""

import json

import pytest

from tests import probe_checkpoints as pc
from tests.repair_support import FACTORY, SGD_FACTORY, ext_env, load, saved_checksum

pytestmark = pytest.mark.slow

STAGE2 = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 2}}


@pytest.fixture(autouse=True)
def _ds_env(monkeypatch):
    for key, value in ext_env().items():
        monkeypatch.setenv(key, value)


def repair(cli, *args):
    proc = cli("repair", *map(str, args), "--apply", "--json", env=ext_env())
    assert proc.returncode in (0, 1), proc.stderr.decode()
    return proc.returncode, json.loads(proc.stdout)


def saved_config(root):
    from triage.probe.safe_pickle import read_shard

    return read_shard(str(root / "global_step3" / "mp_rank_00_model_states.pt")).ds_config


def passed(result: dict, layout: str) -> None:
    load_result = result["verification"]["load"]
    assert result["status"] == "repaired", json.dumps(result["verification"], indent=1)
    assert load_result["ran"] and load_result["ok"], load_result
    assert load_result["checksum"] == pytest.approx(saved_checksum(layout), rel=1e-6)
    assert "+ one training step passed" in load_result["detail"]
    assert all(c["ok"] for c in result["verification"]["structural"])


def repaired(cli, action, root, layout, *args, factory=FACTORY):
    """Repair into a new path; the real load passes with the saved weights; the original is untouched."""
    snapshot = pc.snapshot(root)
    code, result = repair(cli, action, root, *args, "--model-factory", factory)
    assert code == 0, json.dumps(result.get("verification"), indent=1)
    passed(result, layout)
    assert pc.snapshot(root) == snapshot  # every file's sha256, mtime and mode
    return result


@pytest.fixture
def stage2_config(tmp_path):
    path = tmp_path / "stage2.json"
    path.write_text(json.dumps(STAGE2))
    return path


@pytest.fixture(scope="module")
def zero3_stage2_failure():
    """A ZeRO-3 checkpoint loaded by a stage-2 engine (corpus case zero3-saved-stage2-load-dp2)."""
    root = pc.scenario(pc.ZERO3)
    return root, load(root, world_size=2, config=STAGE2)


def test_latest_pointing_at_a_missing_tag_repaired(cli):
    root = pc.copy_of("zero2-dp1-latest-points-to-missing-tag", "repair")
    before = load(root, world_size=1)
    assert not before.ok and "check_ckpt_list" in before.detail, before.detail  # no model-states file found
    snapshot = pc.snapshot(root)
    code, result = repair(cli, "latest", root, "--model-factory", FACTORY)
    assert code == 0
    passed(result, "z2-dp1-fp32")
    assert result["verification"]["load"]["global_steps"] == 3
    assert (root / "latest").read_text() == "global_step3"
    backups = list(root.glob("latest.bak-*"))
    assert [b.read_text() for b in backups] == ["global_step99"]
    after = pc.snapshot(root)
    changed = {p for p in set(snapshot) | set(after) if snapshot.get(p) != after.get(p)}
    assert changed == {str(root), str(root / "latest"), str(backups[0])}  # the dir's mtime, latest, its backup


def test_latest_is_put_back_when_the_real_load_fails(cli):
    root = pc.copy_of("zero2-dp1-latest-points-to-missing-tag", "rollback")
    code, result = repair(cli, "latest", root, "--model-factory", SGD_FACTORY)  # SGD cannot take AdamW state
    assert code == 1 and result["status"] == "verification_failed"
    assert not result["verification"]["load"]["ok"] and result["verification"]["load"]["log"]
    assert (root / "latest").read_text() == "global_step99" and "restored" in result["rolled_back"]
    assert [b.read_text() for b in root.glob("latest.bak-*")] == ["global_step99"]


def test_zero3_loaded_by_stage2_through_fp32(cli, zero3_stage2_failure, stage2_config, tmp_path):
    root, before = zero3_stage2_failure
    assert not before.ok and "check_ckpt_list" in before.detail, before.detail  # no mp_rank_00_model_states.pt
    out = tmp_path / "fp32"
    result = repaired(cli, "fp32", root, "z3-dp2-fp32", "--out", out, "--config", stage2_config)
    assert result["verification"]["load"]["mode"] == "state-dict"
    assert sorted(p.name for p in out.iterdir()) == ["pytorch_model.bin"]


def test_config_action_gives_the_config_the_load_passes_with(cli, zero3_stage2_failure, stage2_config, tmp_path):
    root, before = zero3_stage2_failure
    assert not before.ok
    out = tmp_path / "matching.json"
    result = repaired(cli, "config", root, "z3-dp2-fp32", "--config", stage2_config, "--out", out)
    assert json.loads(out.read_text()) == dict(STAGE2, zero_optimization={"stage": 3})
    assert result["verification"]["load"]["world_size"] == 2


def test_dp2_to_dp1_through_universal(cli, tmp_path):
    root = pc.scenario(pc.HEALTHY)  # ZeRO-2 saved on 2 ranks
    before = load(root, world_size=1)
    assert not before.ok and "world size" in before.detail, before.detail
    out = tmp_path / "universal"
    result = repaired(cli, "universal", root, "z2-dp2-fp32", "--out", out, "--world-size", 1)
    assert result["verification"]["load"]["world_size"] == 1
    assert (out / "latest_universal").read_text() == "global_step3"
    assert any('"load_universal": true' in line for line in result["plan"]["how_to_load"])


def test_strip_optimizer_then_load_module_only(cli, tmp_path):
    root = pc.scenario("zero2-dp1-adamw-saved-sgd-load")  # AdamW state, the job now builds SGD
    before = load(root, world_size=1, factory=SGD_FACTORY, config=saved_config(root))
    assert not before.ok and "KeyError: 'momentum'" in before.detail, before.detail  # at the step after the load
    out = tmp_path / "weights"
    result = repaired(cli, "strip-optimizer", root, "z2-dp1-fp32", "--out", out, factory=SGD_FACTORY)
    assert result["verification"]["load"]["mode"] == "module-only"
    assert sorted(p.name for p in (out / "global_step3").iterdir()) == ["mp_rank_00_model_states.pt"]
