"""Loads through transformers' Trainer, TRL, accelerate and PEFT, triaged on their real checkpoints
(corpus/checkpoints/, unpacked with each case's fault) with their real logs. Those jobs leave
DeepSpeed's logger at WARNING: no stage, world size or precision in the log. What the probes read
instead: the tag the framework passes, the failed lookup itself (check_ckpt_list's empty glob, the
optimizer shard name, the file a FileNotFoundError names, ZeRO's DP world-size refusal), and the
framework's own files beside the shards."""

import json
import os

import pytest

from corpus import faults, kept
from tests.conftest import ROOT
from triage.kb.source import load_yaml
from triage.probe import framework_files
from triage.probe.target import from_args

MANIFEST = {c["id"]: c for c in load_yaml((ROOT / "corpus" / "manifest.yaml").read_text())}


def triage(cli, case_id, tmp_path, checkpoint_of=None):
    """triage --json of a case's real log on the checkpoint of `checkpoint_of` (default: its own)."""
    root = kept.unpack(MANIFEST[checkpoint_of or case_id], tmp_path / (checkpoint_of or case_id))
    proc = cli("triage", "--log", ROOT / "corpus" / MANIFEST[case_id]["log"], "--ckpt", root, "--json")
    data = json.loads(proc.stdout)
    return data, {p["name"]: p for p in data["probes"]}


def test_the_same_log_of_two_causes_is_told_apart_by_the_checkpoint(cli, tmp_path):
    # accelerate: a ZeRO-3 checkpoint loaded by a stage-2 engine and a ZeRO-2 one missing its
    # model-states file print the very same bare AssertionError, and nothing else tells them apart
    stage = (ROOT / "corpus" / MANIFEST["accelerate-zero3-saved-stage2-load"]["log"]).read_text()
    deleted = (ROOT / "corpus" / MANIFEST["accelerate-model-states-deleted"]["log"]).read_text()
    assert stage.count("AssertionError") == deleted.count("AssertionError") > 0
    data, probes = triage(cli, "accelerate-zero3-saved-stage2-load", tmp_path)
    assert (data["verdict"]["status"], data["verdict"]["category"]) == ("confirmed", "zero_stage_mismatch")
    assert probes["config"]["signals"] == ["stage_differs"] and "ZeRO stage 0, 1 or 2" in probes["config"]["evidence"][0]
    # the tag accelerate passes (pytorch_model) is the one checked: a missing file is ruled out
    assert "tag_uncertain" in probes["latest"]["checked"]
    data, probes = triage(cli, "accelerate-model-states-deleted", tmp_path)
    assert (data["verdict"]["status"], data["verdict"]["category"]) == ("confirmed", "missing_file")
    assert probes["config"]["signals"] == []  # an empty lookup a missing file explains says nothing of the stage


def test_a_load_one_level_off_is_no_stage_change(cli, tmp_path):
    # load_state given pytorch_model/ (the tag dir) or the dir above the checkpoint: the same bare
    # AssertionError as a stage change, on a whole ZeRO-2 checkpoint. Where the load looked is what
    # tells them apart: with it (--load-dir) a wrong path is confirmed, without it (the tag dir
    # given alone) the empty lookup is not put down to the stage.
    case = MANIFEST["accelerate-load-tag-dir"]
    log = ROOT / "corpus" / case["log"]
    root = kept.unpack(case, tmp_path / "ckpt")
    for load_dir in (root / "pytorch_model", root.parent):
        data = json.loads(cli("triage", "--log", log, "--ckpt", root, "--load-dir", load_dir, "--json").stdout)
        probes = {p["name"]: p for p in data["probes"]}
        assert (data["verdict"]["status"], data["verdict"]["category"]) == ("confirmed", "missing_file"), load_dir
        assert "wrong_level" in probes["path"]["signals"] and probes["config"]["signals"] == [], load_dir
    data = json.loads(cli("triage", "--log", log, "--ckpt", root / "pytorch_model", "--json").stdout)
    probes = {p["name"]: p for p in data["probes"]}
    assert probes["config"]["signals"] == [] and "stage_differs" not in probes["config"]["checked"]
    assert data["verdict"]["status"] != "confirmed", data["verdict"]


def test_a_stage_change_through_the_trainer_is_confirmed_both_ways(cli, tmp_path):
    for case_id, engine in (("trainer-zero2-saved-stage3-resume", "ZeRO-3"), ("trl-zero3-saved-stage2-resume", "0, 1 or 2")):
        data, probes = triage(cli, case_id, tmp_path)
        assert (data["verdict"]["status"], data["verdict"]["category"]) == ("confirmed", "zero_stage_mismatch"), case_id
        assert engine in probes["config"]["evidence"][0]


def test_an_unreadable_tag_is_no_stage_change(cli):
    # the glob of a tag dir the job cannot read comes back empty too: the permission probe's, not a stage
    from tests import probe_checkpoints as pc

    root = kept.unpack(MANIFEST["accelerate-zero3-saved-stage2-load"], pc.session_dir() / "fw-unreadable-tag")
    faults.make_world_readable(str(root))
    os.chmod(root / "pytorch_model", 0o700)  # root's own: uid 65534 cannot list it
    proc = cli("triage", "--log", ROOT / "corpus" / MANIFEST["accelerate-zero3-saved-stage2-load"]["log"],
               "--ckpt", root, "--json", "--as-user", "65534")
    data = json.loads(proc.stdout)
    probes = {p["name"]: p for p in data["probes"]}
    assert probes["permission"]["signals"] and probes["config"]["signals"] == []
    assert data["verdict"]["category"] == "permission_denied"


def test_a_framework_file_the_job_cannot_read_is_found(cli):
    # accelerate's own scheduler.bin, chmod 000 (the case's fault step): DeepSpeed's shards are all
    # readable, so only a read of the framework's files beside them confirms the PermissionError
    from tests import probe_checkpoints as pc

    case = MANIFEST["accelerate-scheduler-unreadable"]
    root = kept.unpack(case, pc.session_dir() / "fw-unreadable-scheduler")
    ckpt = kept.given(case, root)
    log = ROOT / "corpus" / case["log"]
    proc = cli("triage", "--log", log, "--ckpt", ckpt, "--json", "--as-user", "65534")
    data = json.loads(proc.stdout)
    permission = {p["name"]: p for p in data["probes"]}["permission"]
    assert permission["signals"] == ["unreadable"], permission
    assert "scheduler.bin: cannot open it for reading" in permission["evidence"][0]
    assert (data["verdict"]["status"], data["verdict"]["category"]) == ("confirmed", "permission_denied")
    # root reads it: no finding, but the file closed to the job's user is named
    data = json.loads(cli("triage", "--log", log, "--ckpt", ckpt, "--json").stdout)
    permission = {p["name"]: p for p in data["probes"]}["permission"]
    assert permission["signals"] == [] and data["verdict"]["status"] != "confirmed"
    os.chmod(ckpt / "scheduler.bin", 0o644)
    data = json.loads(cli("triage", "--log", log, "--ckpt", ckpt, "--json", "--as-user", "65534").stdout)
    assert data["verdict"]["status"] != "confirmed"  # readable again: the log's guess is struck off


def test_the_load_settings_a_framework_log_gives(tmp_path):
    def target(case_id):
        return from_args(None, None, None, (ROOT / "corpus" / MANIFEST[case_id]["log"]).read_text())

    accelerate = target("accelerate-zero2-saved-stage3-load")
    assert accelerate.load_tag == "pytorch_model" and accelerate.no_model_states and not accelerate.loads_latest
    trainer = target("trainer-zero3-saved-stage2-resume")
    assert trainer.loads_latest and trainer.load_tag is None and trainer.no_model_states
    assert target("trainer-dp2-saved-resume-dp1").world_size == 1  # ZeRO's "current world size is 1"
    assert target("trainer-bf16-saved-fp32-resume").bf16_naming is False  # it asked for zero_pp_rank_*
    assert target("zero2-dp2-fp32-saved-bf16-load").bf16_naming is None  # the printed config says bf16 first
    assert [p.rsplit("/", 2)[-2:] for p, _ in target("trainer-trainer-state-deleted").missing_paths] == \
        [["checkpoint-3", "trainer_state.json"]]
    assert [p.rsplit("/", 1)[-1] for p, _ in target("peft-full-model-loaded-as-adapter").missing_paths] == \
        ["adapter_config.json"]
    healthy = target("resume-trainer-z2-dp2-fp32")
    assert not healthy.no_model_states and healthy.missing_paths == [] and healthy.bf16_naming is None


@pytest.mark.parametrize("case_id, confirmed_by", [
    ("trainer-trainer-state-deleted", "path"),  # checkpoint-3/trainer_state.json, placed in the output dir
    ("accelerate-scheduler-deleted", "path"),  # scheduler.bin
    ("accelerate-load-dir-missing", "path"),  # the folder accelerate was told to load
    ("trainer-bf16-saved-fp32-resume", "config"),  # it asked for zero_pp_rank_*, the tag holds bf16_zero_pp_rank_*
    ("trainer-dp2-saved-resume-dp1", "completeness"),
    ("accelerate-scheduler-truncated", "integrity"),
    ("safetensors-truncated", "integrity"),
    ("safetensors-header-json-damaged", "integrity"),
    ("safetensors-header-size-damaged", "integrity"),
])
def test_framework_failures_are_confirmed_on_their_checkpoint(case_id, confirmed_by, cli, tmp_path):
    data, probes = triage(cli, case_id, tmp_path)
    assert data["verdict"]["status"] == "confirmed", data["verdict"]
    assert data["verdict"]["category"] == MANIFEST[case_id]["expected_category"]
    # a signal, or a fact that confirms only the cause the log names (the world size ZeRO refused)
    assert probes[confirmed_by]["signals"] or probes[confirmed_by]["supports"], probes[confirmed_by]


def test_a_named_file_that_is_there_is_no_finding(cli, tmp_path):
    # the Trainer's trainer_state.json error, against a checkpoint that has the file (restored since,
    # or the job read another copy): the rule is struck off, not confirmed
    data, probes = triage(cli, "trainer-trainer-state-deleted", tmp_path, checkpoint_of="resume-trainer-z2-dp2-fp32")
    assert "named_missing" in probes["path"]["checked"] and "named_missing" not in probes["path"]["signals"]
    assert data["verdict"]["status"] != "confirmed"


def test_every_file_a_framework_saved_is_found_and_whole(tmp_path):
    for case_id, names in (("resume-trainer-z2-dp2-fp32", {"scheduler.pt", "rng_state_0.pth", "rng_state_1.pth",
                                                             "training_args.bin", "model.safetensors"}),
                           ("resume-accelerate-z2-dp2-fp32", {"scheduler.bin", "random_states_0.pkl"}),
                           ("peft-adapter-load", {"model.safetensors", "adapter_model.safetensors"})):
        root = kept.unpack(MANIFEST[case_id], tmp_path / case_id)
        found = framework_files.find(str(root))
        assert names <= {os.path.basename(p) for p in found}, (case_id, found)
        assert [framework_files.problem(p, str(root)) for p in found] == [None] * len(found)


def test_a_link_out_of_the_checkpoint_is_not_followed(tmp_path):
    root = kept.unpack(MANIFEST["resume-accelerate-z2-dp2-fp32"], tmp_path / "ckpt")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "model.safetensors").write_bytes(b"\xff" * 64)  # would be "garbage" if it were read
    (root / "linked").symlink_to(outside)
    (root / "scheduler_1.bin").symlink_to(outside / "model.safetensors")
    found = framework_files.find(str(root))
    assert not [p for p in found if "linked" in p or p.endswith("scheduler_1.bin")]
