"""The loading job's settings read from where they are (issue 19, point 2): each confirmed or
refuted on a real checkpoint saved under one setting, with the real log of the load that failed
under another (corpus scenarios, made again by tests/probe_checkpoints.py), and each probe naming
the source it took the setting from."""

import json

import pytest

from tests import probe_checkpoints as pc
from tests.conftest import ROOT
from triage.probe import checks, verdict
from triage.probe.context import ProbeContext
from triage.probe.target import from_args

pytestmark = pytest.mark.slow

CASES = ROOT / "corpus" / "cases"
CLEAN = ROOT / "corpus" / "clean"


def triage_json(cli, case_id: str, log=None) -> dict:
    proc = cli("triage", "--log", log or CASES / f"{case_id}.log", "--ckpt", pc.scenario(case_id), "--json")
    data = json.loads(proc.stdout)
    assert proc.returncode == (0 if data["verdict"]["status"] == "confirmed" else 1)
    return data


def probe_of(data: dict, name: str) -> dict:
    return next(p for p in data["probes"] if p["name"] == name)


def test_a_model_parallel_size_other_than_the_saved_mp_world_size(cli):
    # tp 2 x dp 1 saved, loaded as dp 2 without the mpu: the world size (2) is the saved one, the
    # model-parallel size is not; DeepSpeed's distributed-groups summary in the log says which.
    data = triage_json(cli, "tp2-saved-load-dp2")
    assert data["verdict"]["status"] == "confirmed" and data["verdict"]["category"] == "parallelism_mismatch"
    completeness = probe_of(data, "completeness")
    assert "mp_differs" in completeness["signals"] and "world_size_differs" not in completeness["signals"]
    assert completeness["sources"]["mp"].startswith("the log, line ")
    line = int(completeness["sources"]["mp"].rsplit(" ", 1)[1])
    assert (CASES / "tp2-saved-load-dp2.log").read_text().splitlines()[line - 1].strip() == "self.mp_world_size=1"
    assert data["target"]["mp"] == 1 and data["target"]["dp"] == 2


def test_the_same_mp_size_refutes_it():
    # the ZeRO-2 dp 2 -> dp 1 load: mp 1 as saved; the world size is what differs
    ctx = ProbeContext.for_path(str(pc.scenario("zero2-dp2-saved-load-dp1")),
                                from_args(None, None, None, (CASES / "zero2-dp2-saved-load-dp1.log").read_text()))
    result = checks.run(ctx, ("completeness",))["completeness"]
    assert "mp_differs" in result.checked and "mp_differs" not in result.signals
    # the log's world size: a load without optimizer states prints the same, so the difference is
    # a fact that confirms the log's world-size error (verdict.SUPPORT), never a problem alone
    assert result.signals == [] and result.supports[:1] == ["world_size_differs"]
    assert "world_size_differs" not in result.checked  # nor does it refute the log's cause


def test_a_pipeline_checkpoint_loaded_by_a_plain_engine(cli):
    data = triage_json(cli, "pp2-saved-load-no-pipeline")
    assert data["verdict"]["category"] == "parallelism_mismatch" and data["verdict"]["status"] == "confirmed"
    completeness = probe_of(data, "completeness")
    assert "pipeline_differs" in completeness["signals"], completeness
    assert data["target"]["pipeline"] is False and completeness["sources"]["pipeline"].startswith("the log, line ")
    assert any("no PipelineEngine" in line for line in completeness["evidence"])


def test_a_pipeline_engine_with_another_number_of_stages():
    # PipelineModule topology in the log: 1 stage; the checkpoint's parallel_dimensions: 2
    log = (CASES / "pp2-saved-load-pp1.log").read_text()
    target = from_args(None, None, None, log)
    assert (target.pipeline, target.pp) == (True, 1)
    ctx = ProbeContext.for_path(str(pc.scenario("pp2-saved-load-pp1")), target)
    result = checks.run(ctx, ("completeness",))["completeness"]
    assert "pipeline_differs" in result.signals
    assert any("saved with 2 pipeline stages" in line for line in result.evidence)


def test_a_stage_0_checkpoint_loaded_at_stage_2_names_its_sources(cli):
    data = triage_json(cli, "zero0-saved-stage2-load-dp1")
    assert data["verdict"]["category"] == "zero_stage_mismatch" and data["verdict"]["status"] == "confirmed"
    completeness = probe_of(data, "completeness")
    assert "stage_differs" in completeness["signals"]
    assert completeness["sources"]["stage"] == data["target"]["sources"]["stage"]
    assert completeness["sources"]["stage"].startswith("the log, line ")


def test_the_launch_command_gives_the_world_size_at_the_default_log_level(cli):
    # DeepSpeed at WARNING prints no engine configuration: `bash -x`'s echo of the torchrun line does.
    case = "job-zero2-dp2-saved-load-dp1-default-log-level"
    assert "DeepSpeedEngine configuration" not in (CASES / f"{case}.log").read_text()
    data = triage_json(cli, case)
    assert data["verdict"]["status"] == "confirmed" and data["verdict"]["category"] == "parallelism_mismatch"
    assert data["target"]["world_size"] == 1
    assert data["target"]["sources"]["world_size"] == "the launch command, line 1"
    assert probe_of(data, "completeness")["sources"]["world_size"] == "the launch command, line 1"


def test_precision_from_the_engine_configuration_alone():
    # A paste that ends before the ds_config dump (print_user_config): the engine configuration's
    # bfloat16_config line still says the load runs bf16, and the saved checkpoint is fp32.
    case = "zero2-dp2-fp32-saved-bf16-load"
    lines = (CASES / f"{case}.log").read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if "print_user_config" in line)
    target = from_args(None, None, None, "".join(lines[:cut]))
    assert target.config is None and target.precision == "bf16"
    ctx = ProbeContext.for_path(str(pc.scenario(case)), target)
    config = checks.run(ctx, ("config",))["config"]
    assert config.signals == ["precision_differs"] and config.sources["precision"].startswith("the log, line ")
    assert "saved fp32" in config.evidence[0]
    # the same cut of a load that kept the saved precision refutes it
    same = (CASES / "zero2-dp2-saved-load-dp1.log").read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(same) if "print_user_config" in line)
    ctx = ProbeContext.for_path(str(pc.scenario("zero2-dp2-saved-load-dp1")),
                                from_args(None, None, None, "".join(same[:cut])))
    config = checks.run(ctx, ("config",))["config"]
    assert config.checked == ["precision_differs"] and not config.signals


def test_a_checkpoint_saved_by_a_newer_release_is_a_fact_not_a_problem(cli):
    # ds_version rewritten to 0.99.0 in the optimizer shard: DeepSpeed 0.19.8 loads it without a word
    case = "zero2-dp1-optim-ds-version-newer"
    probe = cli("probe", pc.scenario(case), "--json")
    data = json.loads(probe.stdout)
    assert probe.returncode == 0 and data["findings"] == []
    version = probe_of(data, "version")
    assert version["supports"] == ["saved_newer"] and version["status"] == "refuted"
    assert "0.99.0" in version["summary"]
    triaged = triage_json(cli, case, log=CLEAN / f"{case}.log")
    assert triaged["verdict"]["status"] != "confirmed" and triaged["findings"] == []
    assert "0.99.0" in probe_of(triaged, "version")["summary"]
    assert "0.19.8 (the log, line" in probe_of(triaged, "version")["summary"]


def test_a_newer_release_confirms_only_a_version_skew_the_log_shows():
    case = "zero2-dp1-optim-ds-version-newer"
    ctx = ProbeContext.for_path(str(pc.scenario(case)), from_args(None, None, None, (CLEAN / f"{case}.log").read_text()))
    results = checks.run(ctx, checks.ORDER)
    assert verdict.decide("version_incompatible", "DS-V102", results).status == "confirmed"
    assert verdict.decide("zero_stage_mismatch", "DS-Z001", results).status != "confirmed"
    assert verdict.findings(results) == []
    # the same checkpoint untouched (saved by the installed release): nothing to support a skew
    healthy = ProbeContext.for_path(str(pc.scenario(pc.HEALTHY)))
    assert verdict.decide("version_incompatible", "DS-V102", checks.run(healthy, checks.ORDER)).status != "confirmed"


# Facts of the checkpoint that confirm the cause the log names (verdict.SUPPORT, REFINES), and the
# load's param groups from ZeRO-1/2's start-up: each on the real checkpoint and log of its case.
CONFIRMED_BY_THE_CHECKPOINT = {
    "killed-save-zero2-load-explicit-tag": ("partial_checkpoint", "completeness.incomplete_save"),
    "zero2-dp1-param-groups-changed": ("optimizer_mismatch", "optimizer.groups_differ"),
    "zero_to_fp32-zero0-checkpoint": ("zero_stage_mismatch", "completeness.zero0_saved"),
    "zero2-dp2-load-universal-unconverted": ("config_mismatch", "completeness.not_universal"),
    "ds_to_universal-zero2-dp2-without-inject-missing-state": ("known_bug", "completeness.no_universal_info"),
    "zero_to_fp32-tp2-z1-fp32-unsupported": ("parallelism_mismatch", "completeness.model_parallel_saved"),
}


@pytest.mark.parametrize("case_id", sorted(CONFIRMED_BY_THE_CHECKPOINT))
def test_the_checkpoint_confirms_the_cause_the_log_names(case_id, cli):
    category, signal = CONFIRMED_BY_THE_CHECKPOINT[case_id]
    data = triage_json(cli, case_id)
    assert data["verdict"]["status"] == "confirmed" and data["verdict"]["category"] == category, data["verdict"]
    assert signal in data["verdict"]["reason"]


def test_a_save_that_died_explains_the_missing_shard(cli):
    data = triage_json(cli, "killed-save-zero2-load-explicit-tag")
    # the log's missing-file cause is confirmed, and the probes say why the file is missing
    assert "DS-F002 (missing_file) confirmed" in data["verdict"]["reason"]
    assert data["findings"] == ["missing_file", "partial_checkpoint"]


def test_the_load_param_groups_come_from_zero_start_up(cli):
    data = triage_json(cli, "zero2-dp1-param-groups-changed")
    assert data["target"]["param_groups"] == 2
    optimizer = probe_of(data, "optimizer")
    assert optimizer["sources"]["param_groups"].startswith("the log, line ")
    assert "saved 1" in optimizer["evidence"][0] and "the load builds 2 (the log, line" in optimizer["evidence"][0]


def test_supports_alone_flag_nothing():
    # a healthy stage-0 checkpoint, not universal, with no universal_checkpoint_info: all supports, no finding
    ctx = ProbeContext.for_path(str(pc.scenario("zero_to_fp32-zero0-checkpoint")))
    results = checks.run(ctx, checks.ORDER)
    assert {"zero0_saved", "not_universal", "no_universal_info"} <= set(results["completeness"].supports)
    assert verdict.findings(results) == [] and results["completeness"].status == "refuted"


def test_a_healthy_tensor_parallel_resume_is_not_a_world_size_change(cli):
    # DeepSpeed prints the data-parallel size as `world_size`; tp 2 runs on dp 1 x mp 2 = 2 ranks
    case = "resume-tp2-z1-fp32"
    data = triage_json(cli, case, log=CLEAN / f"{case}.log")
    assert data["target"]["world_size"] == 2 and data["findings"] == []
    assert data["verdict"]["status"] != "confirmed"


def test_a_healthy_zero3_bf16_resume_is_not_a_version_problem(cli):
    # ZeRO-3 keeps no ds_version in its optimizer state, bf16 or not, and checks none
    case = "resume-z3-dp2-bf16"
    data = triage_json(cli, case, log=CLEAN / f"{case}.log")
    assert data["findings"] == [] and "ds_version_missing" not in probe_of(data, "version")["signals"]


def test_a_converter_given_a_tag_dir_is_not_a_load_one_level_off(cli):
    # ds_to_universal takes the tag dir (--input_folder): no load_checkpoint ran, no load dir to judge
    case = "ds_to_universal-z2-dp2-fp32"
    proc = cli("triage", "--log", CLEAN / f"{case}.log", "--ckpt", pc.scenario(case) / "global_step3", "--json")
    data = json.loads(proc.stdout)
    assert data["findings"] == [] and "load_dir" not in data["target"]["sources"]
