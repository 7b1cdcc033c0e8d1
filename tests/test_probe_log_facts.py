"""What the failing job's own log tells the probes (triage/probe/log_facts.py), on real logs and
the real checkpoints of the same corpus scenarios."""

import json

import pytest

from tests import probe_checkpoints as pc
from tests.conftest import ROOT
from triage.probe.log_facts import model_claims, user_config

CASES = ROOT / "corpus" / "cases"


def test_the_printed_ds_config_is_read_back():
    config, line = user_config((CASES / "zero2-dp2-fp32-saved-bf16-load.log").read_text())
    assert config["bf16"] == {"enabled": True} and config["zero_optimization"] == {"stage": 2}
    assert "print_user_config" in (CASES / "zero2-dp2-fp32-saved-bf16-load.log").read_text().splitlines()[line - 1]


def test_a_log_without_the_dump_gives_no_config():
    assert user_config("Traceback (most recent call last):\nAssertionError\n") == (None, 0)


def test_torch_load_state_dict_claims_are_parsed_per_kind():
    renamed = model_claims((CASES / "zero2-dp1-model-renamed.log").read_text())
    assert renamed.missing[:2] == ["trunk.0.weight", "trunk.0.bias"] and len(renamed.unexpected) == 8
    hidden = model_claims((CASES / "zero2-dp1-model-hidden-changed.log").read_text())
    assert hidden.sizes["head.weight"] == ((8, 128), (8, 192)) and not hidden.missing
    assert not model_claims((CASES / "zero3-saved-stage2-load-dp2.log").read_text())
    # torch's copy of the saved flat fp32 partition (tensor b) into the load's (tensor a)
    partition = model_claims((CASES / "zero3-dp2-model-hidden-changed.log").read_text())
    assert partition.partition == (33540, 74884) and not partition.sizes and not partition.missing


# case -> (expected verdict category, the probe signal that must decide it)
DECIDED_BY_THE_LOG = {
    "zero2-dp1-model-hidden-changed": ("model_mismatch", "model.shapes_differ"),
    "zero2-dp1-model-renamed": ("model_mismatch", "model.missing_keys"),
    "zero3-dp2-model-extra-layer": ("model_mismatch", "model.missing_keys"),
    "zero3-dp2-model-hidden-changed": ("model_mismatch", "model.partition_differs"),
    "pp2-model-hidden-changed": ("model_mismatch", "model.shapes_differ"),  # the layer files' shapes
    "zero2-dp2-fp32-saved-bf16-load": ("config_mismatch", "config.precision_differs"),
    "torch-load-zero2-optim-shard": ("unsafe_load_blocked", "weights_only.refused_globals"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case_id", sorted(DECIDED_BY_THE_LOG))
def test_triage_confirms_from_the_log_without_model_or_config_options(case_id, cli):
    category, signal = DECIDED_BY_THE_LOG[case_id]
    proc = cli("triage", "--log", CASES / f"{case_id}.log", "--ckpt", pc.scenario(case_id), "--json")
    data = json.loads(proc.stdout)
    assert proc.returncode == 0, data["verdict"]
    assert data["verdict"]["category"] == category and data["verdict"]["source"] == "log"
    assert signal in data["verdict"]["reason"], data["verdict"]


@pytest.mark.slow
def test_a_stage_0_save_loaded_at_stage_2_is_confirmed_against_the_other_causes_of_its_error(cli):
    # ZeRO-0 saved, stage-2 load: the log's FileNotFoundError reads like a missing or
    # precision-switched optimizer shard (both refuted) or a stage-0 save (DS-Z004), which the
    # checkpoint confirms. (A verdict from the probes alone, every hypothesis refuted:
    # tests/test_probe_consistency.py.)
    case = "zero0-saved-stage2-load-dp1"
    data = json.loads(cli("triage", "--log", CASES / f"{case}.log", "--ckpt", pc.scenario(case), "--json").stdout)
    status = {h["rule_id"]: h["status"] for h in data["hypotheses"]}
    assert status["DS-F002"] == status["DS-C001"] == "refuted" and status["DS-Z004"] == "confirmed", status
    assert data["verdict"]["category"] == "zero_stage_mismatch" and data["verdict"]["rule_id"] == "DS-Z004"
    assert data["verdict"]["status"] == "confirmed" and data["verdict"]["source"] == "log"


@pytest.mark.slow
def test_weights_only_runs_only_when_a_cause_names_it(cli):
    # every ZeRO shard pickles DeepSpeed objects: `probe` must not call a healthy checkpoint broken
    proc = cli("probe", pc.scenario(pc.HEALTHY), "--json")
    data = json.loads(proc.stdout)
    assert proc.returncode == 0 and "weights_only" not in {p["name"] for p in data["probes"]}
