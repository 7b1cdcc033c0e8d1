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
    assert result["load"]["world_size"] == 1 and result["load"]["world_size_source"].startswith("the log, line ")
    # the command it suggests reads the log again: the world size and the ds_config come back with it
    assert result["command"].startswith(f"ds-triage triage --log {pc.ROOT / 'corpus' / 'cases'}/{case}.log ")
    assert result["command"].endswith(f"--reproduce --model-factory {FACTORY}")


@pytest.mark.parametrize("args, message", [(["--model-factory", "nocolon"], "expected MODULE:FUNCTION")])
def test_bad_model_factory_is_a_usage_error(cli, args, message):
    proc = cli("probe", pc.scenario(pc.HEALTHY), "--reproduce", *args)
    assert proc.returncode == 2 and message in proc.stderr.decode()


# --- how the load is set up (triage/probe/reproduction.py), without running it ---

def _setup(root, log=None, **target):
    from triage.probe.context import ProbeContext
    from triage.probe.layout import first_model_file
    from triage.probe.reproduction import setup
    from triage.probe.target import from_args

    text = log.read_text() if log else None
    t = from_args(target.pop("stage", None), target.pop("world_size", None), target.pop("config", None), text,
                  **target)
    t.log_path = str(log) if log else None
    ctx = ProbeContext.for_path(str(root), t, reproduce=True)
    meta = ctx.meta(first_model_file(ctx.listing).name)
    return ctx, setup(ctx, ctx.layout(), meta, None)


def test_the_stage_given_is_written_into_the_config_it_loads_with(tmp_path):
    config = tmp_path / "ds_config.json"
    config.write_text(json.dumps(dict(STAGE2, train_batch_size=8)))
    ctx, s = _setup(pc.scenario(pc.ZERO3), stage=1, config=str(config))
    assert s.stage == 1 and s.config["zero_optimization"] == {"stage": 1}
    assert s.config["train_batch_size"] == 8  # the user's own config is loaded as it is, but for the stage
    assert s.changes == ["zero_optimization.stage 2 -> 1 (--stage)"]
    assert s.config_source == f"{config} (--config)"
    from triage.probe.reproduction import rerun_command

    assert rerun_command(ctx, s.world_size).split()[2:] == [
        str(pc.scenario(pc.ZERO3)), "--reproduce", "--world-size", "2", "--stage", "1", "--config", str(config)]


def test_the_log_gives_the_stage_world_size_optimizer_and_the_models_shapes():
    """A dp-1 ZeRO-2 job whose model grew (hidden 128 -> 192): torch's size mismatches make the stand-in."""
    case = "zero2-dp1-model-hidden-changed"
    log = pc.ROOT / "corpus" / "cases" / f"{case}.log"
    ctx, s = _setup(pc.scenario(case), log)
    assert s.world_size == 1 and s.world_source.startswith("the log, line ")
    assert s.config_source.startswith("the log, line ") and s.stage == 2
    assert s.optimizer == "AdamW" and s.optimizer_source.startswith("the log, line ")
    shapes = {k: v for group in s.twin for k, v in group.items()}
    assert shapes["blocks.0.weight"] == [192, 192] and shapes["head.weight"] == [8, 192]
    assert s.model_changes == ["9 shape(s) as the job's model had them (the log, line 168: size mismatch)"]
    from triage.probe.reproduction import rerun_command

    assert rerun_command(ctx, s.world_size) == f"ds-triage triage --log {log} --ckpt {pc.scenario(case)} --reproduce"


def test_param_groups_and_an_optimizer_given_shape_the_stand_in():
    ctx, s = _setup(pc.scenario(pc.HEALTHY), param_groups=3, optimizer="torch.optim.SGD")
    saved = [n for g in ctx.meta(ctx.listing.of("model")[0].name).param_group_shapes for n in g]
    assert len(s.twin) == 3 and [n for g in s.twin for n in g] == saved  # same order, split in three
    assert s.model_changes == ["3 param group(s) (--param-groups), saved 1"]
    assert s.optimizer == "SGD"
    from triage.probe.reproduction import rerun_command

    assert rerun_command(ctx, s.world_size).endswith("--optimizer torch.optim.SGD --param-groups 3")
