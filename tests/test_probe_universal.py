"""A universal checkpoint and checkpoint.load_universal: the config probe's universal_differs.

DeepSpeed 0.19.8 does not load a universal checkpoint (ds_to_universal's `<tag>_universal` with its
`zero/` folder) silently without load_universal: it looks for zero_pp_rank_*_optim_states.pt in it
and raises FileNotFoundError, a message the log shares with a deleted shard or a precision change.
The checkpoint tells them apart.
"""

import json

import pytest

from corpus import runner
from corpus import layouts as L
from tests import probe_checkpoints as pc
from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def config_probe(cli, root, config):
    proc = cli("probe", root, "--config", config, "--json")
    return proc.returncode, next(p for p in json.loads(proc.stdout)["probes"] if p["name"] == "config")


def test_a_converted_tag_without_load_universal_and_load_universal_without_a_conversion(cli, tmp_path):
    root = pc.copy_of(pc.HEALTHY, "universal")
    pre = {"run": "ds_to_universal", "flags": ["--inject_missing_state"]}
    rc = runner.run(runner.build_command(pre, L.LAYOUTS["z2-dp2-fp32"], str(root)), {}, tmp_path / "convert.log")
    assert rc == 0, (tmp_path / "convert.log").read_text()[-2000:]
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2}}))
    universal = tmp_path / "universal.json"
    universal.write_text(json.dumps({"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2},
                                     "checkpoint": {"load_universal": True}}))
    converted = root / "global_step3_universal"
    rc, found = config_probe(cli, converted, plain)
    assert rc == 1 and found["signals"] == ["universal_differs"], found
    assert "checkpoint.load_universal" in found["evidence"][0] and "FileNotFoundError" in found["evidence"][0]
    assert config_probe(cli, converted, universal)[1]["status"] == "refuted"
    rc, found = config_probe(cli, root / "global_step3", universal)
    assert rc == 1 and found["signals"] == ["universal_differs"] and "ds_to_universal" in found["evidence"][0], found
    assert config_probe(cli, root / "global_step3", plain)[1]["status"] == "refuted"


def test_load_universal_on_an_unconverted_checkpoint_is_confirmed(cli):
    case = "zero2-dp2-load-universal-unconverted"
    log = ROOT / "corpus" / "cases" / f"{case}.log"
    proc = cli("triage", "--log", log, "--ckpt", pc.scenario(case), "--json")
    verdict = json.loads(proc.stdout)["verdict"]
    assert (verdict["status"], verdict["rule_id"]) == ("confirmed", "DS-C101"), verdict
