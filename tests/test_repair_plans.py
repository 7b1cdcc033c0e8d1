"""`ds-triage repair`: dry runs write nothing, refusals are one line with exit 1, the JSON matches
its schema, and --apply without a model factory still verifies the structure (and says no real
load ran). Real checkpoints from tests/probe_checkpoints.py; no DeepSpeed load here
(tests/test_repair_loads.py has those)."""

import json
import os
import shutil

import pytest

from tests import probe_checkpoints as pc
from tests.repair_support import ext_env
from tests.test_probe_cli import _validator, errors

pytestmark = pytest.mark.slow
SCHEMA = _validator("repair.schema.json")
ACTIONS = ("latest", "fp32", "universal", "config")


def siblings(root):
    return sorted(p.name for p in root.parent.iterdir() if p.name.startswith(root.name))


@pytest.mark.parametrize("action", ACTIONS)
def test_dry_run_prints_the_plan_and_writes_nothing(cli, action):
    root = pc.copy_of(pc.ZERO3, f"dry-{action}")
    before, names = pc.snapshot(root), siblings(root)
    proc = cli("repair", action, root)
    assert proc.returncode == 0, proc.stderr.decode()
    text = proc.stdout.decode()
    assert f"repair {action}:" in text and "dry run: nothing was written" in text
    assert pc.snapshot(root) == before and siblings(root) == names
    data = json.loads(cli("repair", action, root, "--json").stdout)
    assert errors(SCHEMA, data) == []
    assert data["status"] == "planned" and data["done"] == [] and not data["applied"]


def test_plans_name_deepspeeds_own_tools(cli):
    root = pc.scenario(pc.HEALTHY)
    universal = json.loads(cli("repair", "universal", root, "--json").stdout)["plan"]
    assert "-m deepspeed.checkpoint.ds_to_universal" in universal["commands"][0]
    assert "--inject_missing_state" in universal["commands"][0]  # engine-saved ZeRO-2 has no universal_checkpoint_info
    assert universal["commands"][0].count(f"{universal['out']}.ds-triage-partial/global_step3") == 1
    dry_run = cli("repair", "universal", root).stdout.decode()  # says up front how to load the result
    assert "how to load the result:" in dry_run and '{"load_universal": true}' in dry_run
    fp32 = json.loads(cli("repair", "fp32", root, "--json").stdout)["plan"]
    assert "-m triage.repair.fp32" in fp32["commands"][0]  # which calls deepspeed.utils.zero_to_fp32
    assert fp32["out"] == f"{root}-fp32" and fp32["writes"] == [f"{root}-fp32/pytorch_model.bin"]


@pytest.mark.parametrize("action,case,message", [
    ("strip-optimizer", pc.ZERO3, "is ZeRO-3"),
    ("fp32", "zero2-dp2-optim-shard-deleted", "is not whole"),
    ("universal", "zero2-dp2-optim-shard-truncated", "is not whole"),
    ("fp32", "zero3-dp2-latest-deleted", None),  # no `latest`: the newest tag is read; fine
])
def test_refusals_are_one_line_and_exit_1(cli, action, case, message):
    root = pc.scenario(case)
    proc = cli("repair", action, root)
    if message is None:
        assert proc.returncode == 0, proc.stderr.decode()
        return
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert message in err and err.startswith("ds-triage: error:") and err.count("\n") == 1
    assert proc.stdout == b""


def test_existing_out_is_never_overwritten(cli, tmp_path):
    root = pc.scenario(pc.HEALTHY)
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep").write_text("mine")
    proc = cli("repair", "fp32", root, "--out", out, "--apply")
    assert proc.returncode == 1 and "never overwrites" in proc.stderr.decode()
    assert [p.name for p in out.iterdir()] == ["keep"]


@pytest.mark.parametrize("args,code,message", [
    (("repair", "fp32", "/no/such/ckpt"), 3, "no such file"),
    (("repair", "nope", "."), 2, "invalid choice"),
    (("repair", "fp32", "{root}", "--model-factory", "nocolon"), 2, "MODULE:FUNCTION"),
    (("repair", "config", "{root}", "--config", "/no/such.json"), 3, "--config"),
    (("repair", "latest", "{root}", "--apply", "--dry-run"), 2, "not allowed with"),
    (("repair", "latest", "{root}", "--out", "/tmp/elsewhere"), 1, "does not apply"),
])
def test_bad_input_exit_codes(cli, args, code, message):
    root = pc.scenario(pc.HEALTHY)
    proc = cli(*[a.format(root=root) for a in args])
    assert proc.returncode == code, proc.stderr.decode()
    assert message in proc.stderr.decode() and "Traceback" not in proc.stderr.decode()


def test_latest_skips_an_incomplete_newer_tag_and_keeps_a_backup(cli):
    root = pc.copy_of(pc.HEALTHY, "latest-incomplete")
    shutil.copytree(root / "global_step3", root / "global_step4")
    os.remove(root / "global_step4" / "zero_pp_rank_1_mp_rank_00_optim_states.pt")
    (root / "latest").write_text("global_step4")
    plan = json.loads(cli("repair", "latest", root, "--json").stdout)["plan"]
    assert plan["tag"] == "global_step3" and plan["replaces"] == [str(root / "latest")]
    assert any(n.startswith("global_step4: skipped, not complete") for n in plan["notes"])
    proc = cli("repair", "latest", root, "--apply", "--json")
    data = json.loads(proc.stdout)
    assert proc.returncode == 0 and errors(SCHEMA, data) == []
    assert (root / "latest").read_text() == "global_step3"
    [backup] = root.glob("latest.bak-*")
    assert backup.read_text() == "global_step4" and [b for b in data["plan"]["backups"]] == [str(backup)]
    assert data["verification"]["load"] == {"ran": False, "reason": data["verification"]["load"]["reason"]}
    assert "--model-factory" in data["verification"]["load"]["reason"]
    again = json.loads(cli("repair", "latest", root, "--json").stdout)["plan"]
    assert again["replaces"] == [] and "nothing to change" in again["steps"][0]


def test_latest_with_no_complete_tag_is_refused(cli):
    root = pc.copy_of("zero2-dp2-optim-shard-deleted", "no-complete")
    proc = cli("repair", "latest", root, "--apply")
    assert proc.returncode == 1 and "no complete tag" in proc.stderr.decode()
    assert (root / "latest").read_text() == "global_step3" and not list(root.glob("latest.bak-*"))


def test_fp32_sharded_safetensors_checked_by_names_and_shapes(cli, tmp_path):
    root = pc.scenario(pc.ZERO3)
    before = pc.snapshot(root)
    out = tmp_path / "st"
    proc = cli("repair", "fp32", root, "--out", out, "--safetensors", "--max-shard-size", "100KB", "--apply",
               "--json", env=ext_env())
    data = json.loads(proc.stdout)
    assert proc.returncode == 0, data
    assert errors(SCHEMA, data) == []
    names = sorted(p.name for p in out.iterdir())
    assert "model.safetensors.index.json" in names and sum(n.endswith(".safetensors") for n in names) > 1
    [check] = data["verification"]["structural"]
    assert check["ok"] and "10 tensors" in check["detail"]
    assert not (tmp_path / "st.ds-triage-partial").exists()
    assert pc.snapshot(root) == before


def test_fp32_names_and_shapes_check_catches_a_wrong_output(tmp_path):
    from triage.repair import fp32

    expected = {"head.weight": [8, 128], "head.bias": [8]}
    assert fp32.compare(expected, {"head.weight": (8, 128), "head.bias": (8,)}) == []
    problems = fp32.compare(expected, {"head.weight": (8, 64), "extra": (1,)})
    assert any("missing: head.bias" in p for p in problems)
    assert any("did not save: extra" in p for p in problems)
    assert any("head.weight [8, 64] vs saved [8, 128]" in p for p in problems)


def test_config_diff_against_mine(cli, tmp_path):
    root = pc.scenario(pc.ZERO3)
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps({"train_batch_size": 8, "zero_optimization": {"stage": 2, "elastic_checkpoint": True},
                                "bf16": {"enabled": True}, "checkpoint": {"load_universal": True}}))
    text = cli("repair", "config", root, "--config", mine, "--out", tmp_path / "new.json").stdout.decode()
    assert '-    "stage": 2,' in text and '+    "stage": 3' in text
    assert '-    "enabled": true' in text and '+    "enabled": false' in text
    assert "elastic_checkpoint" in text and "load_universal" in text
    assert not (tmp_path / "new.json").exists()


def test_strip_optimizer_keeps_the_weights_of_a_tag_that_lost_an_optimizer_shard(cli, tmp_path):
    root = pc.scenario("zero2-dp2-optim-shard-deleted")
    out = tmp_path / "weights"
    data = json.loads(cli("repair", "strip-optimizer", root, "--out", out, "--apply", "--json").stdout)
    assert data["status"] == "repaired", data["verification"]
    assert sorted(p.name for p in (out / "global_step3").iterdir()) == ["mp_rank_00_model_states.pt"]
    assert (out / "latest").read_text() == "global_step3"
    proc = cli("repair", "strip-optimizer", pc.scenario("zero2-dp2-model-states-deleted"))
    assert proc.returncode == 1 and "model-states" in proc.stderr.decode()


def test_strip_optimizer_rewrites_a_zero0_model_states_file_without_its_optimizer(cli, tmp_path):
    from triage.probe.safe_pickle import read_shard

    root = tmp_path / "z0"
    shutil.copytree(pc.baselines() / "z0-dp1-fp32", root)
    before = pc.snapshot(root)
    original = read_shard(str(root / "global_step3" / "mp_rank_00_model_states.pt"))
    assert original.optimizer  # ZeRO-0 keeps the torch optimizer's state in the model-states file
    out = tmp_path / "weights"
    data = json.loads(cli("repair", "strip-optimizer", root, "--out", out, "--apply", "--json", env=ext_env()).stdout)
    assert data["status"] == "repaired", data["verification"]
    assert "torch.load(weights_only=True)" in " ".join(data["plan"]["steps"])
    stripped = read_shard(str(out / "global_step3" / "mp_rank_00_model_states.pt"))
    assert stripped.optimizer is None and stripped.module_shapes == original.module_shapes
    assert (out / "global_step3" / "mp_rank_00_model_states.pt").stat().st_size < \
        (root / "global_step3" / "mp_rank_00_model_states.pt").stat().st_size
    assert pc.snapshot(root) == before
