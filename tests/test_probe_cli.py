"""`ds-triage probe` and `ds-triage triage`: JSON against the documented schemas, exit codes,
one-line errors, and the verdicts that only the log and the checkpoint together can give."""

import json
import shutil

import jsonschema
import pytest
from referencing import Registry, Resource

from tests import probe_checkpoints as pc
from tests.conftest import ROOT

pytestmark = pytest.mark.slow
SCHEMAS = ROOT / "docs" / "schemas"
CASES = ROOT / "corpus" / "cases"


def _validator(name):
    registry = Registry()
    for path in SCHEMAS.glob("*.schema.json"):
        schema = json.loads(path.read_text())
        registry = registry.with_resource(schema["$id"], Resource.from_contents(schema))
    schema = json.loads((SCHEMAS / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, registry=registry)


PROBE = _validator("probe.schema.json")
TRIAGE = _validator("triage.schema.json")


def errors(validator, data):
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(data)]


@pytest.mark.parametrize("case_id", [pc.HEALTHY, "zero2-dp2-optim-shard-deleted", "zero2-dp2-optim-shard-truncated",
                                     "zero3-dp2-latest-deleted"])
def test_probe_json_matches_its_schema_and_exit_code(case_id, cli):
    proc = cli("probe", pc.scenario(case_id), "--json")
    data = json.loads(proc.stdout)
    assert not errors(PROBE, data)
    assert [p["name"] for p in data["probes"]] == ["path", "latest", "completeness", "permission", "integrity",
                                                  "version", "config", "model", "optimizer"]
    for p in data["probes"]:
        assert bool(p["signals"]) == (p["status"] == "confirmed")
    if case_id == pc.HEALTHY:
        assert proc.returncode == 0 and data["findings"] == [] and data["problems"] == []
    else:
        assert proc.returncode == 1 and data["findings"] and data["problems"]
    assert data["checkpoint"]["layout"]["dp"] == 2
    assert data["checkpoint"]["layout"]["offload"] == {}  # the corpus trains without ZeRO-Offload


def test_offload_is_read_from_the_saved_ds_config():
    from triage.probe.layout import saved_offload

    # as DeepSpeed's docs write ZeRO-Offload (optimizer on CPU) and ZeRO-Infinity (params on NVMe)
    config = {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": True},
                                    "offload_param": {"device": "nvme", "nvme_path": "/local_nvme"}}}
    assert saved_offload(config) == {"optimizer": "cpu", "param": "nvme"}
    assert saved_offload({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "none"}}}) == {}
    assert saved_offload(None) == {} and saved_offload({"zero_optimization": 2}) == {}


def test_probe_human_output_summarises_what_is_wrong(cli):
    proc = cli("probe", pc.scenario("zero2-dp2-optim-shard-deleted"), "--world-size", "2", "--stage", "2")
    assert proc.returncode == 1
    out = proc.stdout.decode()
    assert "summary: 1 probe(s) found a problem (missing_file)" in out
    assert "missing 1 of 2 optimizer shards: zero_pp_rank_1_mp_rank_00_optim_states.pt" in out
    assert "target: stage 2 (--stage), world size 2 (--world-size)" in out
    healthy = cli("probe", pc.scenario(pc.HEALTHY))
    assert healthy.returncode == 0 and "summary: nothing wrong found" in healthy.stdout.decode()


@pytest.mark.parametrize("given", ["root", "tag", "shard", "latest", "hf"])
def test_probe_finds_the_root_from_whatever_path_is_given(given, cli, tmp_path):
    root = pc.scenario(pc.HEALTHY)
    if given == "hf":  # a Trainer output dir: out/checkpoint-3/{latest, global_step3}
        hf = tmp_path / "out" / "checkpoint-3"
        shutil.copytree(root, hf)
        path, expected_root, kind = hf, hf, "root"
    else:
        path = {"root": root, "tag": root / "global_step3",
                "shard": root / "global_step3" / "zero_pp_rank_1_mp_rank_00_optim_states.pt",
                "latest": root / "latest"}[given]
        expected_root, kind = root, {"root": "root", "tag": "tag_dir", "shard": "shard", "latest": "latest_file"}[given]
    data = json.loads(cli("probe", path, "--json").stdout)
    assert data["checkpoint"]["root"] == str(expected_root)
    assert data["checkpoint"]["given_kind"] == kind
    assert data["checkpoint"]["tag"] == "global_step3"
    path_probe = data["probes"][0]
    # whatever path is at hand is probed as its checkpoint: its own level is no fault
    assert path_probe["signals"] == [] and data["findings"] == [], path_probe
    # ... but as the dir the job passes to load_checkpoint, a tag dir is one level too deep (DS-F005)
    as_load = json.loads(cli("probe", root, "--load-dir", path, "--json").stdout)["probes"][0]
    assert as_load["signals"] == (["wrong_level"] if given == "tag" else []), as_load
    if given == "hf":
        outer = json.loads(cli("probe", tmp_path / "out", "--load-dir", tmp_path / "out", "--json").stdout)
        assert outer["checkpoint"]["root"] == str(hf) and outer["probes"][0]["signals"] == ["wrong_level"]


def test_bad_input_is_one_line_and_exit_3(cli, tmp_path):
    proc = cli("probe", tmp_path / "nope")
    assert proc.returncode == 3
    assert proc.stderr.decode().strip() == f"ds-triage: error: {tmp_path / 'nope'}: no such file or directory"
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    proc = cli("probe", pc.scenario(pc.HEALTHY), "--config", bad)
    assert proc.returncode == 3 and proc.stderr.decode().count("\n") == 1 and "not valid JSON" in proc.stderr.decode()
    proc = cli("triage", "--log", tmp_path / "missing.log", "--ckpt", pc.scenario(pc.HEALTHY))
    assert proc.returncode == 3 and "Traceback" not in proc.stderr.decode()


def test_usage_errors_exit_2(cli):
    assert cli("probe", pc.scenario(pc.HEALTHY), "--stage", "4").returncode == 2
    assert cli("probe", pc.scenario(pc.HEALTHY), "--world-size", "0").returncode == 2
    assert cli("triage", "--ckpt", pc.scenario(pc.HEALTHY)).returncode == 2


def test_a_directory_that_is_no_checkpoint(cli, tmp_path):
    (tmp_path / "empty").mkdir()
    proc = cli("probe", tmp_path / "empty", "--json")
    data = json.loads(proc.stdout)
    assert proc.returncode == 1 and data["probes"][0]["signals"] == ["no_checkpoint"]
    assert data["findings"] == ["missing_file"] and not errors(PROBE, data)


def test_a_dir_without_deepspeed_state_is_no_finding_for_a_job_that_never_used_deepspeed(cli, tmp_path):
    from triage.kb.source import load_yaml

    from corpus import kept

    manifest = {c["id"]: c for c in load_yaml((ROOT / "corpus" / "manifest.yaml").read_text())}
    case = manifest["peft-adapter-load"]
    adapter = kept.given(case, kept.unpack(case, tmp_path / "peft"), loaded=True)  # a real PEFT adapter dir
    assert adapter.name == "adapter" and (adapter / "adapter_config.json").is_file()
    # its own healthy log (PeftModel.from_pretrained, no DeepSpeed): nothing wrong with it
    proc = cli("triage", "--log", ROOT / "corpus" / "clean" / "peft-adapter-load.log", "--ckpt", adapter, "--json")
    data = json.loads(proc.stdout)
    assert data["findings"] == [] and data["probes"][0]["signals"] == [] and not errors(TRIAGE, data)
    assert "did not need one" in data["probes"][0]["summary"] and "no DeepSpeed" in data["probes"][0]["evidence"][0]
    # `probe` has no log: asked about a DeepSpeed checkpoint, the dir has none of its state
    data = json.loads(cli("probe", adapter, "--json").stdout)
    assert data["probes"][0]["signals"] == ["no_deepspeed_state"] and data["findings"] == ["partial_checkpoint"]
    # a Trainer resume through DeepSpeed of a checkpoint-N holding none of DeepSpeed's state (its real
    # log): the same kind of dir is the failure's cause, confirmed
    root = kept.unpack(manifest["trainer-global-step-dir-deleted"], tmp_path / "trainer")
    proc, data = triage(cli, "trainer-global-step-dir-deleted.log", None, ckpt=root / "checkpoint-3")
    assert data["probes"][0]["signals"] == ["no_deepspeed_state"]
    assert data["verdict"]["status"] == "confirmed" and data["verdict"]["category"] == "partial_checkpoint"
    # the same log, with `latest` still naming the deleted tag: DeepSpeed state was saved, then lost
    root = kept.unpack(manifest["trainer-global-step-dir-deleted-latest-kept"], tmp_path / "kept")
    proc, data = triage(cli, "trainer-global-step-dir-deleted-latest-kept.log", None, ckpt=root / "checkpoint-3")
    assert data["verdict"]["status"] == "confirmed" and data["verdict"]["category"] == "missing_file"


def triage(cli, log, case_id, *extra, ckpt=None):
    proc = cli("triage", "--log", CASES / log, "--ckpt", ckpt or pc.scenario(case_id), "--json", *extra)
    data = json.loads(proc.stdout)
    assert not errors(TRIAGE, data), errors(TRIAGE, data)
    return proc, data


def test_bare_assert_with_a_deleted_model_states_file_is_missing_file(cli):
    """The log alone ranks a ZeRO stage change first; the checkpoint shows the file is gone."""
    proc, data = triage(cli, "zero2-dp2-model-states-deleted.log", "zero2-dp2-model-states-deleted")
    assert proc.returncode == 0
    assert data["verdict"]["category"] == "missing_file" and data["verdict"]["rule_id"] == "DS-F001"
    status = {h["rule_id"]: h["status"] for h in data["hypotheses"]}
    assert status["DS-F001"] == "confirmed"
    assert status["DS-Z001"] == "refuted"  # saved ZeRO-2, the log's engine is stage 2
    assert data["hypotheses"][0]["rule_id"] == "DS-F001" and data["category"] == "missing_file"
    assert [h["status"] for h in data["hypotheses"]] == sorted(
        (h["status"] for h in data["hypotheses"]), key=["confirmed", "inconclusive", "refuted"].index)
    assert data["target"]["sources"]["stage"].startswith("the log, line")


def test_bare_assert_on_a_zero3_checkpoint_with_a_stage2_engine_is_zero_stage_mismatch(cli):
    proc, data = triage(cli, "zero3-saved-stage2-load-dp2.log", pc.ZERO3)
    assert proc.returncode == 0
    # the shard names say ZeRO-3; the ds_config DeepSpeed printed in the log says stage 2
    assert data["verdict"] == {"status": "confirmed", "category": "zero_stage_mismatch", "rule_id": "DS-Z001",
                               "source": "log", "reason": "found: completeness.stage_differs, config.stage_differs"}
    status = {h["rule_id"]: h["status"] for h in data["hypotheses"]}
    assert status["DS-A001"] == "refuted"
    # `latest`'s tag is complete, but DeepSpeed printed no tag: a job that passed another one is not ruled out
    assert status["DS-F001"] == "inconclusive"
    z001 = data["hypotheses"][0]
    assert {p["name"] for p in z001["probe_results"]} >= {"completeness", "config"}


def test_the_same_log_against_the_other_checkpoint_changes_the_verdict(cli):
    """zero3-saved-stage2's log against the model-states-deleted checkpoint: what is on disk decides."""
    _, data = triage(cli, "zero3-saved-stage2-load-dp2.log", "zero2-dp2-model-states-deleted")
    assert data["verdict"]["category"] == "missing_file"
    _, data = triage(cli, "zero2-dp2-model-states-deleted.log", pc.ZERO3)
    assert data["verdict"]["category"] == "zero_stage_mismatch"


def test_explicit_stage_overrides_the_log(cli):
    proc, data = triage(cli, "zero3-saved-stage2-load-dp2.log", pc.ZERO3, "--stage", "3")
    assert data["target"]["sources"]["stage"] == "--stage"
    status = {h["rule_id"]: h["status"] for h in data["hypotheses"]}
    assert status["DS-Z001"] == "refuted"  # stage 3 loads a ZeRO-3 checkpoint
    # Nothing confirmed: the answer is the first cause not refuted, said to be only likely (exit 1).
    assert status["DS-F001"] == "inconclusive" and proc.returncode == 1
    assert data["verdict"]["status"] == "likely"
    assert (data["verdict"]["category"], data["verdict"]["rule_id"]) == ("missing_file", "DS-F001")
    assert "did not refute" in data["verdict"]["reason"]


def test_no_hypothesis_and_a_healthy_checkpoint_is_unknown(cli):
    """A clean run's log (no rule fires) against a healthy checkpoint: there is no answer to give."""
    proc = cli("triage", "--log", ROOT / "corpus" / "clean" / "resume-hf-z2-dp2-fp32.log", "--ckpt",
               pc.scenario(pc.HEALTHY), "--json")
    data = json.loads(proc.stdout)
    assert not errors(TRIAGE, data), errors(TRIAGE, data)
    assert data["hypotheses"] == [] and proc.returncode == 1
    assert data["verdict"] == {"status": "unknown", "category": "unknown", "rule_id": None, "source": None,
                               "reason": "no hypothesis from the log, and the probes found no single cause"}


def test_triage_human_output_strikes_off_refuted_causes(cli):
    proc = cli("triage", "--log", CASES / "zero3-saved-stage2-load-dp2.log", "--ckpt", pc.scenario(pc.ZERO3))
    out = proc.stdout.decode()
    assert out.splitlines()[0].startswith("raised: AssertionError")
    assert "verdict: zero_stage_mismatch [DS-Z001]" in out
    assert "x refuted" in out and "(struck off)" in out
    assert "fix (DS-Z001):" in out


def test_triage_quiet_and_markdown(cli):
    """-q: the verdict in one line; --format markdown: the ticket, with the probes and the verdict."""
    args = ("triage", "--log", CASES / "zero3-saved-stage2-load-dp2.log", "--ckpt", pc.scenario(pc.ZERO3))
    quiet = cli(*args, "-q")
    assert quiet.returncode == 0 and quiet.stdout.decode() == "confirmed zero_stage_mismatch [DS-Z001]\n"
    md = cli(*args, "--format", "markdown").stdout.decode()
    assert md.startswith("# Incident report: zero_stage_mismatch [DS-Z001]\n") and "Written by `ds-triage triage`" in md
    assert "## Probe results" in md and "**zero_stage_mismatch** (DS-Z001), confirmed" in md
    data = json.loads(cli(*args, "--json", "--docs-url", "https://docs.example.org/ds-triage/").stdout)
    assert data["hypotheses"][0]["runbook_url"] == "https://docs.example.org/ds-triage/rules/DS-Z001/"


def test_triage_judges_the_level_of_the_dir_the_log_says_was_loaded(cli, tmp_path):
    # A real log of a load given the tag dir, its paths moved to this machine's copy of a healthy
    # checkpoint: DeepSpeed's "Unable to find latest file at DIR/latest" names the dir it was given.
    root = pc.scenario(pc.HEALTHY)
    text = (CASES / "zero2-dp1-load-global-step-dir.log").read_text()
    log = tmp_path / "job.log"
    log.write_text(text.replace("/tmp/ds-triage-corpus/zero2-dp1-load-global-step-dir", str(root)))
    data = json.loads(cli("triage", "--log", log, "--ckpt", root, "--json").stdout)
    assert data["verdict"]["rule_id"] == "DS-F005", data["verdict"]
    path_probe = next(p for p in data["probes"] if p["name"] == "path")
    assert path_probe["signals"] == ["wrong_level"] and str(root / "global_step3") in path_probe["evidence"][0]
    # a log from another host names a dir that does not exist here: --ckpt is taken as the loaded dir
    log.write_text(text.replace("/tmp/ds-triage-corpus/", "/no/such/host/path/"))
    plain = json.loads(cli("triage", "--log", log, "--ckpt", root, "--json").stdout)
    assert next(p for p in plain["probes"] if p["name"] == "path")["signals"] == []


def test_a_tag_the_log_does_not_name_leaves_a_missing_file_standing(cli):
    """load_checkpoint(tag='global_step99') fails on the bare assertion and DeepSpeed prints no tag:
    `latest`'s tag being complete does not rule out the tag the job really asked for."""
    case = "job-zero2-train-then-load-missing-tag"
    _, data = triage(cli, f"{case}.log", case)
    status = {h["rule_id"]: h["status"] for h in data["hypotheses"]}
    assert status["DS-F001"] == "inconclusive" and status["DS-Z001"] == "refuted"
    assert data["hypotheses"][0]["rule_id"] == "DS-F001"  # the report's first standing cause
    latest = next(p for p in data["probes"] if p["name"] == "latest")
    assert any("if the job passed load_checkpoint another tag" in line for line in latest["evidence"])


def test_the_tag_the_log_shows_the_job_opening_is_the_one_probed(cli):
    """The log shows the engine opening global_step3's files; `latest` names a complete global_step2."""
    case = "zero2-dp2-optim-shard-deleted"
    root = pc.copy_of(case, "latest-elsewhere")
    healthy = pc.scenario(pc.HEALTHY) / "global_step3"
    shutil.copytree(healthy, root / "global_step2")
    (root / "latest").write_text("global_step2")
    proc = cli("triage", "--log", CASES / f"{case}.log", "--ckpt", root, "--json")
    data = json.loads(proc.stdout)
    assert data["checkpoint"]["tag"] == "global_step3" and data["checkpoint"]["tag_source"] == "log"
    # the newest tag short of a shard with `latest` on the tag before it is what a save that died
    # leaves: the answer is that deeper cause (verdict.REFINES), the reason keeps the missing file
    assert data["verdict"]["category"] == "partial_checkpoint"
    assert "completeness.optim_missing" in data["verdict"]["reason"]
    assert "completeness.incomplete_save" in data["verdict"]["reason"]
    # without the log the same checkpoint is probed at `latest`'s complete tag
    probed = json.loads(cli("probe", root, "--json").stdout)
    assert probed["checkpoint"]["tag"] == "global_step2" and probed["findings"] == []
