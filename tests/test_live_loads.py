"""The real loads and converters as a person runs them: DeepSpeed's own output on stderr as it comes,
`--reproduce` set up as the failing job was (its stage, its config), the command it suggests
reproducing the same failure, and `--timeout` killing a real load with every process it started."""

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid

import pytest

from tests import probe_checkpoints as pc
from tests import terminal
from tests.conftest import CORPUS, ROOT
from tests.repair_support import FACTORY, ext_env, processes_with
from tests.test_probe_cli import PROBE, TRIAGE, errors

pytestmark = pytest.mark.slow
HANG = "tests.repair_support:hang"


def reproduce_result(run, validator):
    assert run.code in (0, 1), run.stderr[-3000:]
    data = json.loads(run.stdout)
    assert errors(validator, data) == []
    return data, next(p for p in data["probes"] if p["name"] == "reproduce")


def test_a_zero3_checkpoint_probed_with_stage_2_reproduces_the_failure_and_shows_it_live():
    """No --config: the saved ds_config, with the stage --stage says the job used. DeepSpeed's own
    lines reach stderr while the load runs, before the report."""
    root = pc.scenario(pc.ZERO3)
    before = pc.snapshot(root)
    run = terminal.run("probe", root, "--stage", "2", "--reproduce", "--json", "--progress", terminal=False,
                       env=ext_env())
    data, result = reproduce_result(run, PROBE)
    assert result["status"] == "confirmed" and result["signals"] == ["load_fails"], result
    assert "passed" not in result["summary"]
    assert "AssertionError" in result["evidence"][0] and "check_ckpt_list" in result["evidence"][0]
    assert "DS-Z001 zero_stage_mismatch" in result["evidence"][1]
    load = result["load"]
    assert load["stage"] == 2 and load["config"]["zero_optimization"]["stage"] == 2 and load["world_size"] == 2
    assert load["config_source"] == "the ds_config saved in the checkpoint"
    assert load["config_changes"] == ["zero_optimization.stage 3 -> 2 (--stage)"]
    assert any(line.startswith("ds_config loaded: {") and '"zero_optimization":{"stage":2}' in line
               for line in result["evidence"])
    assert shlex.split(result["command"])[1:] == ["probe", str(root), "--reproduce", "--world-size", "2", "--stage", "2"]
    assert data["findings"] == ["zero_stage_mismatch"] and run.code == 1
    # live: DeepSpeed's own lines, as they come, before the process ends and before the report
    report_at = run.first("stdout", "{")[0]
    for line in ("  | [rank0]: AssertionError", "DeepSpeed info: version="):
        at, running = run.first("stderr", line)
        assert running and at < report_at, (line, at, report_at)
    assert pc.snapshot(root) == before


def test_the_command_triage_suggests_reproduces_the_failure_it_diagnosed():
    """triage takes the stage-2 ds_config the log printed; the command it suggests reads the log again."""
    root = pc.scenario(pc.ZERO3)
    log = CORPUS / "cases" / f"{pc.ZERO3}.log"
    run = terminal.run("triage", "--log", log, "--ckpt", root, "--reproduce", "--json", terminal=False, env=ext_env())
    data, result = reproduce_result(run, TRIAGE)
    assert data["verdict"]["category"] == "zero_stage_mismatch" and run.code == 0
    assert result["status"] == "confirmed" and "check_ckpt_list" in result["evidence"][0]
    assert result["load"]["stage"] == 2 and result["load"]["config_source"].startswith("the log, line ")
    command = shlex.split(result["command"])
    assert command == ["ds-triage", "triage", "--log", str(log), "--ckpt", str(root), "--reproduce"]
    again = terminal.run(*command[1:], "--json", terminal=False, env=ext_env())
    _, rerun = reproduce_result(again, TRIAGE)
    assert rerun["status"] == "confirmed" and rerun["evidence"][0] == result["evidence"][0]
    assert rerun["load"]["config"] == result["load"]["config"]


def test_a_model_changed_since_the_save_is_reproduced_from_torchs_own_error_in_the_log():
    """No --model-factory: the stand-in takes the shapes torch printed for the job's model, so the
    load fails as the job's did (it passed with the saved shapes)."""
    case = "zero2-dp1-model-hidden-changed"
    log = CORPUS / "cases" / f"{case}.log"
    run = terminal.run("triage", "--log", log, "--ckpt", pc.scenario(case), "--reproduce", "--json", terminal=False,
                       env=ext_env())
    data, result = reproduce_result(run, TRIAGE)
    assert result["status"] == "confirmed", result
    assert "size mismatch for blocks.0.weight" in result["evidence"][0]
    assert "DS-M001 model_mismatch" in result["evidence"][1]
    assert result["load"]["model_changes"] == ["9 shape(s) as the job's model had them (the log, line 168: size "
                                               "mismatch)"]
    assert data["verdict"]["category"] == "model_mismatch"


def test_a_timeout_kills_the_real_load_and_every_process_it_started(tmp_path):
    marker = f"ds-triage-test-{uuid.uuid4()}"
    started = tmp_path / "started"
    run = terminal.run("probe", pc.scenario(pc.HEALTHY), "--reproduce", "--model-factory", HANG, "--timeout", "12",
                       terminal=False, env=dict(ext_env(), DS_TRIAGE_TEST_MARK=marker,
                                                DS_TRIAGE_TEST_STARTED=str(started)))
    assert run.code == 6 and run.stdout == "", run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ds-triage: error: the real DeepSpeed load ("), lines
    assert "ran past the time limit of 12 s and was stopped: " in lines[0]
    assert "process(es) killed (torchrun and the ranks it had started)" in lines[0]
    assert "--timeout SECONDS" in lines[0]
    killed = int(lines[0].split("was stopped: ")[1].split(" process")[0])
    assert killed >= 3  # torchrun and its 2 ranks
    assert processes_with(marker) == []  # nothing left running


def test_a_timeout_stops_a_converter_and_writes_nothing(tmp_path):
    root = pc.scenario(pc.HEALTHY)
    before = pc.snapshot(root)
    out = tmp_path / "universal"
    marker = f"ds-triage-test-{uuid.uuid4()}"
    run = terminal.run("repair", "universal", root, "--apply", "--out", out, "--timeout", "1", terminal=False,
                       env=dict(ext_env(), DS_TRIAGE_TEST_MARK=marker))
    assert run.code == 6, run.stderr
    assert "ds_to_universal" in run.stderr and "ran past the time limit of 1 s and was stopped" in run.stderr
    assert "nothing was written to the output" in run.stderr
    assert not out.exists() and not (tmp_path / "universal.ds-triage-partial").exists()
    assert processes_with(marker) == []
    assert pc.snapshot(root) == before


def test_a_timeout_of_the_verifying_load_puts_latest_back(tmp_path):
    root = pc.copy_of("zero2-dp1-latest-points-to-missing-tag", "timeout")
    previous = (root / "latest").read_text()
    run = terminal.run("repair", "latest", root, "--apply", "--model-factory", HANG, "--timeout", "10", terminal=False,
                       env=ext_env())
    assert run.code == 6, run.stderr
    assert "ran past the time limit of 10 s" in run.stderr and f"restored {root / 'latest'}" in run.stderr
    assert (root / "latest").read_text() == previous


def test_repair_apply_shows_deepspeeds_own_output_as_it_comes(tmp_path):
    root = pc.scenario("zero2-dp1-model-hidden-changed")  # a whole dp-1 ZeRO-2 checkpoint (the fault is in the load)
    out = tmp_path / "fp32"
    run = terminal.run("repair", "fp32", root, "--apply", "--out", out, "--model-factory", FACTORY, "--progress",
                       terminal=False, env=ext_env())
    assert run.code == 0, run.stderr[-3000:]
    report_at = run.first("stdout", "repair fp32")[0]
    at, running = run.first("stderr", "  | Processing zero checkpoint")  # zero_to_fp32's own line
    assert running and at < report_at
    assert "repair fp32: triage.repair.fp32" in run.stderr  # the meter: lines and time elapsed
    assert "repair fp32: verifying the result with a real DeepSpeed load on 1 rank(s)" in run.stderr


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_stopping_ds_triage_during_a_real_load_kills_the_load_too(tmp_path, sig, code):
    """The load runs in a session of its own, which neither a Ctrl-C nor a SIGTERM to ds-triage reaches."""
    marker = f"ds-triage-test-{uuid.uuid4()}"
    started = tmp_path / "started"
    env = dict(os.environ, **ext_env(), DS_TRIAGE_TEST_MARK=marker, DS_TRIAGE_TEST_STARTED=str(started))
    proc = subprocess.Popen([sys.executable, "-m", "triage", "probe", str(pc.scenario(pc.HEALTHY)), "--reproduce",
                             "--model-factory", HANG], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 600
        while not list(tmp_path.glob("started.*")) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        assert list(tmp_path.glob("started.*")), "no rank reached the model factory"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err.decode()[-2000:]
    assert "Traceback" not in err.decode()
    assert processes_with(marker) == []
