"""Pasted Trainer and accelerate configs and the kernel's OOM killer, read by shape from real captures:
tests/fixtures/evidence/ (README.md there says which command, which release, where) and the real
Trainer checkpoints in corpus/checkpoints/. Each becomes the facts the probes use, checked against
what the frameworks' own code makes of the same config (accelerate's DeepSpeedPlugin, transformers'
HfTrainerDeepSpeedConfig, captured beside it); a paste that does not show a setting claims none."""

import json
import re
import subprocess
import sys
import tarfile

import pytest
import yaml

from tests.conftest import ROOT
from triage import evidence
from triage.evidence.apply import context
from triage.probe.checks.config import FIELDS, _same, lookup
from triage.probe.target import config_precision, config_stage

FIX = ROOT / "tests" / "fixtures" / "evidence"
CHECKPOINTS = ROOT / "corpus" / "checkpoints"
OPT1 = "zero_pp_rank_1_mp_rank_00_optim_states.pt"  # the shard corpus's trainer-optim-shard-deleted removes


def read(name: str) -> str:
    return (FIX / name).read_text()


def found(text: str) -> tuple[list, str]:
    """(the recognised items, the text left as log)."""
    items = evidence.read(text)
    return [e for e in items if e.kind != "log"], evidence.log_text(items)


def target(text: str):
    return context(evidence.read(text), None).target


def one_config(text: str) -> dict:
    items, log = found(text)
    assert [e.kind for e in items] == ["config"] and not log.strip(), (items, log)
    return items[0].facts


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """The corpus's real Trainer checkpoints, unpacked (read only by name; no pickle is opened)."""
    out = tmp_path_factory.mktemp("ckpts")
    for name in ("trainer-z2-dp2-fp32", "trainer-z3-dp2-fp32", "accelerate-z3-dp2-fp32"):
        with tarfile.open(CHECKPOINTS / f"{name}.tar.xz") as tar:
            tar.extractall(out, filter="data")
    return out


def listing(root) -> str:
    """`cat latest; echo; ls -la ROOT ROOT/TAG`, run for real."""
    tag = (root / "latest").read_text().strip()
    done = subprocess.run(["bash", "-c", f"cat {root}/latest; echo; ls -la {root} {root}/{tag}"], capture_output=True,
                          text=True, check=True)
    return done.stdout


@pytest.mark.parametrize("name", ["accelerate-deepspeed-zero3-bf16", "accelerate-deepspeed-config-file"])
def test_an_accelerate_config_gives_the_ds_config_accelerate_builds_from_it(name):
    text = read(f"{name}.yaml")
    facts = one_config(text)
    built = json.loads(read(f"{name}.plugin.json"))  # accelerate's own launch code and DeepSpeedPlugin
    section = yaml.safe_load(text)["deepspeed_config"]
    got = target(text)
    if "deepspeed_config_file" in section:  # the settings are that file's, which the paste does not show
        assert facts["config"] is None and facts["config_file"] == section["deepspeed_config_file"]
        assert (got.stage, got.precision) == (None, None)  # not stage 0 / fp32
        return
    assert (got.stage, got.precision) == (config_stage(built), config_precision(built)) == (3, "bf16")
    for label, dotted, default, _, kind in FIELDS:  # every setting the config probe compares
        theirs = lookup(built, dotted, default)
        if theirs != "auto":  # filled at run time from the script's batch sizes
            assert _same(kind, lookup(facts["config"], dotted, default), theirs), label


def test_accelerate_config_default_is_read_as_a_run_without_deepspeed():
    text = read("accelerate-default.yaml")  # JSON, whatever its name
    facts = one_config(text)
    assert facts["distributed_type"] == json.loads(text)["distributed_type"] == "NO" and facts["config"] is None
    assert target(text).stage is None


@pytest.mark.parametrize("name", ["trainingargs-deepspeed-dict-zero3", "trainingargs-deepspeed-dict-zero2-auto",
                                  "trainingargs-deepspeed-path"])
def test_training_arguments_give_the_ds_config_the_trainer_hands_deepspeed(name):
    text = read(f"{name}.json")
    facts = one_config(text)
    resolved = json.loads(read(f"{name}.resolved.json"))  # transformers' own HfTrainerDeepSpeedConfig
    got = target(text)
    shown = json.loads(text)["deepspeed"]
    if isinstance(shown, str):  # a path: its stage and precision are in a file the paste does not show
        assert facts["config"] is None and facts["config_file"] == shown
        assert (got.stage, got.precision) == (None, None)  # not stage 0 / fp32
        return
    assert (got.stage, got.precision) == (config_stage(resolved), config_precision(resolved))
    assert "pasted" in got.sources["stage"]


def test_trainer_state_and_the_model_config_claim_no_setting(checkpoints):
    ck = checkpoints / "trainer-z3-dp2-fp32" / "checkpoint-3"
    state = (ck / "trainer_state.json").read_text()
    facts = one_config(state)
    assert facts["config"] is None and facts["global_step"] == json.loads(state)["global_step"]
    got = target(state)  # its train_batch_size is the Trainer's: not a ds_config of stage 0
    assert (got.stage, got.precision, got.config) == (None, None, None)
    model = (ck / "config.json").read_text()  # the model's config: no load setting, read as text
    assert found(model)[0] == [] and target(model).stage is None


@pytest.mark.parametrize("name", ["dmesg-tail-memcg-oom.txt", "dmesg-T-tail-memcg-oom.txt", "dmesg-grep-oom.txt"])
def test_the_kernels_oom_report_is_one_item_naming_the_killed_process(name):
    text = read(name)
    items, log = found(text)
    assert [e.kind for e in items] == ["oom"], items
    for part in ("invoked oom-killer", "Call Trace", "Tasks state", "oom-kill:constraint", "Killed process"):
        assert part not in log, part  # every line of the report is claimed, none read as the job's log
    # the report's own summary line names the task and the memory cgroup whose limit it hit
    summary = re.search(r"oom_memcg=([^,]+),.*,task=([^,]+),pid=(\d+)", text)
    [kill] = items[0].facts["oom_kills"]
    assert (kill["process"], kill["pid"]) == (summary[2], summary[3])
    assert kill["limit"] == f"memory cgroup {summary[1]}"


def verdict(log: str, *files) -> dict:
    done = subprocess.run([sys.executable, "-m", "triage", "triage", "--log", str(ROOT / "corpus" / "cases" / log),
                           "--evidence", *map(str, files), "--json"], capture_output=True, text=True, cwd=ROOT)
    assert done.stdout, done.stderr
    data = json.loads(done.stdout)
    return {"verdict": (data["verdict"]["status"], data["verdict"]["rule_id"]),
            "status": {h["rule_id"]: h["status"] for h in data["hypotheses"]},
            "used": {h["rule_id"]: h["evidence_used"] for h in data["hypotheses"]}}


def test_a_pasted_oom_kill_confirms_the_rank_killed_during_the_load():
    got = verdict("zero2-dp2-load-sigkill.log", FIX / "dmesg-tail-memcg-oom.txt")
    assert got["status"]["DS-R002"] == "confirmed"
    assert any("dmesg-tail-memcg-oom.txt" in used for used in got["used"]["DS-R002"])


@pytest.mark.parametrize("case, layout, fault", [
    ("trainer-optim-shard-deleted", "trainer-z2-dp2-fp32/checkpoint-3", f"global_step3/{OPT1}"),
    ("trainer-zero3-saved-stage2-resume", "trainer-z3-dp2-fp32/checkpoint-3", None)])
def test_configs_that_do_not_show_the_stage_leave_the_verdict_alone(checkpoints, tmp_path, case, layout, fault):
    """A trainer_state.json, TrainingArguments naming a ds_config file, an accelerate config naming one or
    running without DeepSpeed show no ZeRO stage: the verdict, and the evidence said to decide it, are
    those of the listing alone. Read as a stage-0 ds_config, they confirmed a stage-0 engine (DS-Z004)
    against the ZeRO-2 save of trainer-optim-shard-deleted."""
    ck = checkpoints / layout
    if fault:
        (ck / fault).unlink()  # the case's fault, on this module's own copy
    (tmp_path / "ls.txt").write_text(listing(ck))
    base = verdict(f"{case}.log", tmp_path / "ls.txt")
    for paste in (ck / "trainer_state.json", FIX / "trainingargs-deepspeed-path.json",
                  FIX / "accelerate-deepspeed-config-file.yaml", FIX / "accelerate-default.yaml"):
        got = verdict(f"{case}.log", tmp_path / "ls.txt", paste)
        assert got == base, (paste.name, got, base)


@pytest.mark.parametrize("log, layout, config, status", [
    # the load's stage as the case ran it (2, against a ZeRO-3 save): confirmed, the config named
    ("trainer-zero3-saved-stage2-resume.log", "trainer-z3-dp2-fp32/checkpoint-3",
     "trainingargs-deepspeed-dict-zero2-auto.json", {"DS-Z301": "confirmed"}),
    # a config of the saved stage: the stage cause is refuted
    ("trainer-zero3-saved-stage2-resume.log", "trainer-z3-dp2-fp32/checkpoint-3",
     "trainingargs-deepspeed-dict-zero3.json", {"DS-Z301": "refuted", "DS-Z001": "refuted"}),
    ("accelerate-zero3-saved-stage2-load.log", "accelerate-z3-dp2-fp32",
     "accelerate-deepspeed-zero3-bf16.yaml", {"DS-Z001": "refuted"})])
def test_the_stage_a_pasted_config_names_decides_the_stage_cause(checkpoints, tmp_path, log, layout, config, status):
    (tmp_path / "ls.txt").write_text(listing(checkpoints / layout))
    alone = verdict(log, tmp_path / "ls.txt")
    got = verdict(log, tmp_path / "ls.txt", FIX / config)
    rule = next(iter(status))
    assert alone["status"][rule] == "confirmed", alone  # by elimination, from the names alone
    assert {r: got["status"][r] for r in status} == status, got
    if status[rule] == "confirmed":
        assert any(config in used for used in got["used"][rule]), got["used"]
    else:
        assert got["verdict"][1] not in status, got
