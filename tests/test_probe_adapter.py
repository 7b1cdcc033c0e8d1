"""An adapter-only checkpoint (real DeepSpeed save with exclude_frozen_parameters=True of a model
named as PEFT names a LoRA model) and the real captured log of loading one strictly (rule DS-H001)."""

import json
import os
import subprocess
import sys

import pytest
import yaml

from tests import probe_checkpoints as pc
from tests.repair_support import ext_env
from tests.test_probe_cli import TRIAGE, errors

pytestmark = pytest.mark.slow
ROOT = pc.ROOT
H001 = ROOT / "rules" / "partial_checkpoint" / "DS-H001-peft-adapter-only-checkpoint-loaded-strictly.yaml"


@pytest.fixture(scope="module")
def adapter_ckpt(tmp_path_factory):
    root = tmp_path_factory.mktemp("adapter") / "ckpt"
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1",
                           str(ROOT / "tests" / "adapter_checkpoint_worker.py"), "--save-dir", str(root)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300, env=dict(os.environ, **ext_env()))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return root


@pytest.fixture(scope="module")
def strict_load_log(tmp_path_factory):
    """The rule's own real capture: peft's LoRA model, ZeRO-2, load_checkpoint with the default strict load."""
    example = next(e for e in yaml.safe_load(H001.read_text())["examples"] if e["expect"] == "match" and "log" in e)
    path = tmp_path_factory.mktemp("log") / "job.log"
    path.write_text(example["log"])
    return path


def triage(cli, log, ckpt):
    proc = cli("triage", "--log", log, "--ckpt", ckpt, "--json")
    data = json.loads(proc.stdout)
    assert errors(TRIAGE, data) == []
    return proc.returncode, data


def test_base_weights_missing_from_an_adapter_only_checkpoint_is_confirmed(cli, adapter_ckpt, strict_load_log):
    code, data = triage(cli, strict_load_log, adapter_ckpt)
    model = next(p for p in data["probes"] if p["name"] == "model")
    assert model["signals"] == ["adapter_only"], model
    assert "lora_A.default.weight" in model["evidence"][0]
    assert data["verdict"]["rule_id"] == "DS-H001" and data["verdict"]["category"] == "partial_checkpoint"
    assert code == 0


def test_the_same_log_against_a_full_checkpoint_rules_the_adapter_cause_out(cli, strict_load_log):
    _, data = triage(cli, strict_load_log, pc.scenario(pc.HEALTHY))
    model = next(p for p in data["probes"] if p["name"] == "model")
    assert "adapter_only" in model["checked"] and "adapter_only" not in model["signals"]
    h001 = next(h for h in data["hypotheses"] if h["rule_id"] == "DS-H001")
    assert h001["status"] == "refuted"
