"""The trust gate (triage/probe/trust.py): nothing loads a checkpoint for real until every file that
load would open is verified safe; `--trust-checkpoint` overrides it and the report says so.

Payloads (tests/hostile/payloads.py) are planted in copies of real DeepSpeed baselines; each writes
a marker file when unpickled, so a test sees whether anything ran it.
"""

import json
import os
import subprocess
import sys

import pytest

from tests import probe_checkpoints as pc
from tests.hostile import payloads, pickles
from tests.repair_support import ext_env
from triage.errors import EXIT_UNTRUSTED
from triage.probe import trust
from triage.repair.guarded_save import STAGING, GuardedSaveError, publish

ROOT = pc.ROOT
# name -> (builder, the layout it is planted in): zip and legacy payloads in the model states DeepSpeed
# reads on every load; a stray file only DeepSpeed's converters glob.
HOSTILE = {
    "zip": (payloads.zip_payload, "z2-dp2-fp32"),
    "legacy": (payloads.legacy_payload, "z2-dp2-fp32"),
    "stray": (payloads.stray_payload, "z2-dp2-fp32"),
}


def run(*args, timeout=120):
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(ROOT), **ext_env())
    return subprocess.run([sys.executable, "-m", "triage", *map(str, args)], capture_output=True, cwd=ROOT,
                          env=env, timeout=timeout)


def hostile(kind, tmp_path):
    build, layout = HOSTILE[kind]
    root = payloads.copy_baseline(layout, tmp_path / f"{kind}-ckpt")
    marker = tmp_path / f"{kind}.marker"
    build(root, marker)
    return root, marker


def refused(proc, marker, planted):
    err = proc.stderr.decode()
    assert proc.returncode == EXIT_UNTRUSTED, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "not verified safe" in err and planted.name in err and "--trust-checkpoint" in err, err
    assert not marker.exists(), "the payload ran"


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_the_gate_sees_each_payload_without_running_it(kind, tmp_path):
    root, marker = hostile(kind, tmp_path)
    report = trust.scan(str(root / payloads.TAG))
    bad = {f.name: f for f in report.untrusted}
    planted = "extra_optim_states.pt" if kind == "stray" else "mp_rank_00_model_states.pt"
    assert list(bad) == [planted] and bad[planted].verdict == "suspicious"
    assert "builtins.exec" in bad[planted].detail
    assert ("legacy-format" in bad[planted].detail) == (kind == "legacy")
    assert not marker.exists()


@pytest.mark.parametrize("kind", sorted(HOSTILE))
@pytest.mark.parametrize("command", [
    ("probe", "--reproduce"),
    ("repair", "fp32", "--apply"),
    ("repair", "universal", "--apply"),
])
def test_every_real_load_is_refused(kind, command, tmp_path):
    root, marker = hostile(kind, tmp_path)
    planted = root / payloads.TAG / ("extra_optim_states.pt" if kind == "stray" else "mp_rank_00_model_states.pt")
    if command[0] == "probe":
        proc = run("probe", root, *command[1:])
    else:
        out = () if command[1] == "latest" else ("--out", tmp_path / "out")  # latest is edited in place
        proc = run(*command[:2], root, *out, *command[2:])
    refused(proc, marker, planted)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_latest_never_names_an_untrusted_tag(kind, tmp_path):
    """`repair latest` picks the newest complete tag; one the gate cannot verify is skipped, not loaded."""
    root, marker = hostile(kind, tmp_path)
    (root / "latest").unlink()
    proc = run("repair", "latest", root, "--apply")
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "no complete tag" in err and "names builtins.exec" in err, err
    assert not (root / "latest").exists() and not marker.exists()


def test_the_dry_run_says_apply_will_refuse(tmp_path):
    root, marker = hostile("zip", tmp_path)
    proc = run("repair", "fp32", root, "--out", tmp_path / "out", "--json")
    notes = json.loads(proc.stdout)["plan"]["notes"]
    assert proc.returncode == 0 and any(n.startswith("--apply refuses this tag unless --trust-checkpoint: 1 file")
                                        for n in notes), notes
    assert not marker.exists()


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_verify_calls_it_not_healthy(kind, tmp_path):
    root, marker = hostile(kind, tmp_path)
    proc = run("verify", root, "--json")
    data = json.loads(proc.stdout)
    assert proc.returncode == 1 and data["healthy"] is False
    assert any(p.startswith("trust: ") and "suspicious" in p for p in data["problems"]), data["problems"]
    assert not marker.exists()


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_the_guarded_save_does_not_publish_it(kind, tmp_path):
    root, marker = hostile(kind, tmp_path)
    staged = root / STAGING / "global_step9"
    staged.parent.mkdir()
    (root / payloads.TAG).rename(staged)
    with pytest.raises(GuardedSaveError, match="trust: .*suspicious"):
        publish(str(root), "global_step9")
    assert (root / "latest").read_text() == payloads.TAG  # not moved
    assert staged.is_dir() and not (root / "global_step9").exists()
    assert not marker.exists()


def test_an_unreadable_legacy_file_is_unverifiable(tmp_path):
    """A legacy-format file the reader cannot follow is refused too, not waved through."""
    root = payloads.copy_baseline("z2-dp1-fp32", tmp_path / "ckpt")
    shard = payloads.legacy_clean(root)
    data = shard.read_bytes()
    shard.write_bytes(data[:300])  # inside the object pickle: what follows the header is cut off
    report = trust.scan(str(root / payloads.TAG))
    assert [(f.name, f.verdict) for f in report.untrusted] == [(shard.name, "unverifiable")]
    proc = run("repair", "fp32", root, "--out", tmp_path / "out", "--apply")
    assert proc.returncode == EXIT_UNTRUSTED and "unverifiable" in proc.stderr.decode()


def test_a_legacy_file_over_the_readers_caps_is_refused(tmp_path):
    """The legacy reader keeps the zip reader's caps: a real legacy header, then an object pickle of
    two million EMPTY_SETs (~2 MB on disk, ~430 MB if unpickled), is refused before it is followed."""
    import pickletools

    root = payloads.copy_baseline("z2-dp1-fp32", tmp_path / "ckpt")
    shard = payloads.legacy_clean(root)
    data = shard.read_bytes()
    end = 0
    for _ in range(3):  # magic number, protocol, sys_info: keep them as torch wrote them
        end = next(pos for op, _, pos in pickletools.genops(data[end:]) if op.name == "STOP") + end + 1
    shard.write_bytes(data[:end] + b"\x80\x02" + pickles.empty_sets(2_000_000) + b".")
    [bad] = trust.scan(str(root / payloads.TAG)).untrusted
    assert (bad.name, bad.verdict) == (shard.name, "suspicious") and "cap" in bad.detail


def test_a_clean_legacy_checkpoint_passes_the_gate(tmp_path):
    """What an old torch wrote, nothing added: followed by the safe reader and verified safe."""
    root = payloads.copy_baseline("z2-dp1-fp32", tmp_path / "ckpt")
    payloads.legacy_clean(root)
    report = trust.scan(str(root / payloads.TAG))
    assert len(report.files) == 2 and report.untrusted == []


@pytest.mark.slow
def test_a_healthy_checkpoint_passes_the_gate_and_converts(tmp_path):
    root = payloads.copy_baseline("z2-dp1-fp32", tmp_path / "ckpt")
    proc = run("repair", "fp32", root, "--out", tmp_path / "out", "--apply", "--json", timeout=900)
    data = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stderr.decode()
    assert data["status"] == "repaired" and data["trusted_note"] is None
    assert data["trust"]["checked"] == 2 and data["trust"]["untrusted"] == []


@pytest.mark.slow
def test_a_healthy_checkpoint_passes_the_gate_and_loads(tmp_path):
    root = payloads.copy_baseline("z2-dp2-fp32", tmp_path / "ckpt")
    proc = run("probe", root, "--reproduce", "--json", timeout=900)
    result = next(p for p in json.loads(proc.stdout)["probes"] if p["name"] == "reproduce")
    assert result["status"] == "refuted", result
    assert not any("--trust-checkpoint" in line for line in result["evidence"])


@pytest.mark.slow
@pytest.mark.parametrize("kind,command", [
    ("zip", ("probe", "--reproduce")),
    ("legacy", ("repair", "fp32", "--apply")),
])
def test_trust_checkpoint_loads_it_and_the_report_says_so(kind, command, tmp_path):
    """The override is real: the load goes ahead (the payload runs, which is what trusting means) and the
    report names the files the gate did not verify."""
    root, marker = hostile(kind, tmp_path)
    if command[0] == "probe":
        proc = run("probe", root, "--reproduce", "--trust-checkpoint", "--json", timeout=900)
        result = next(p for p in json.loads(proc.stdout)["probes"] if p["name"] == "reproduce")
        note = next(line for line in result["evidence"] if line.startswith("loaded with --trust-checkpoint"))
    else:
        proc = run("repair", "fp32", root, "--out", tmp_path / "out", "--apply", "--trust-checkpoint", "--json",
                   timeout=900)
        note = json.loads(proc.stdout)["trusted_note"]
    assert note.startswith("loaded with --trust-checkpoint: 1 file(s) not verified safe"), note
    assert "mp_rank_00_model_states.pt" in note
    assert marker.exists(), "the trusted load did not read the planted file"


@pytest.mark.slow
def test_the_converter_does_open_a_stray_file_only_its_glob_names(tmp_path):
    """Why the gate uses DeepSpeed's globs: zero_to_fp32 unpickles `extra_optim_states.pt` (the payload runs)
    before it notices one file too many. Trusted, the error still names what went unverified."""
    root, marker = hostile("stray", tmp_path)
    proc = run("repair", "fp32", root, "--out", tmp_path / "out", "--apply", "--trust-checkpoint", timeout=900)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "found 3 files" in err, err
    assert "loaded with --trust-checkpoint: 1 file(s) not verified safe: extra_optim_states.pt" in err
    assert marker.exists() and not (tmp_path / "out").exists()


# ---------------------------------------------------------------- rule commands that run pickles

UNSAFE = "python -c \"import sys, torch; print(sorted(torch.load(sys.argv[1], weights_only=False)))\" {{ckpt}}/{{tag}}/x.pt"


def _rule_with_unsafe_command(flag: bool) -> str:
    from tests.rule_files import valid_rule

    unsafe = f"          - command: {UNSAFE}\n" + ("            runs_checkpoint_code: true\n" if flag else "") + \
        "            shows: the keys\n"
    text = valid_rule()
    safe = "          - command: ls -la {ckpt}/{tag}\n"
    return text.replace(safe, unsafe.replace("{{", "{").replace("}}", "}") + safe)  # the unsafe one first


def test_lint_rejects_an_unmarked_weights_only_false_command(tmp_path):
    from tests.rule_files import rules_dir
    from triage.errors import BadRules
    from triage.kb import load_rules

    directory = rules_dir(tmp_path, {"DS-T001-test.yaml": _rule_with_unsafe_command(flag=False)})
    with pytest.raises(BadRules) as info:
        load_rules(directory, use_cache=False)
    [problem] = info.value.problems
    assert "weights_only=False" in problem and "runs_checkpoint_code: true" in problem and ":13:" in problem


def test_a_marked_command_is_shown_last_with_a_warning(tmp_path):
    from tests.rule_files import rules_dir
    from triage.kb import load_rules
    from triage.kb.verify_steps import WARNING, ordered

    directory = rules_dir(tmp_path, {"DS-T001-test.yaml": _rule_with_unsafe_command(flag=True)})
    [rule] = load_rules(directory, use_cache=False).rules
    assert rule.data["verify"][0]["runs_checkpoint_code"]  # written first in the rule
    steps = ordered(rule.data["verify"])
    assert [s["command"].split()[0] for s in steps] == ["ls", "python"]
    assert steps[1]["shows"].endswith(f"({WARNING})") and WARNING not in steps[0]["shows"]


def test_every_shipped_command_that_runs_pickles_is_marked_and_last():
    """The shipped rules: weights_only=False only where marked; classify's JSON lists marked ones last."""
    from triage.kb import load_rules
    from triage.kb.verify_steps import WARNING, ordered

    marked = 0
    for rule in load_rules().rules:
        steps = ordered(rule.data["verify"])
        flags = [bool(s.get("runs_checkpoint_code")) for s in steps]
        assert flags == sorted(flags), rule.id
        for step in steps:
            unsafe = "weights_only=False" in step["command"]
            assert unsafe == bool(step.get("runs_checkpoint_code")), (rule.id, step["command"])
            assert (WARNING in step["shows"]) == unsafe
            marked += unsafe
    assert 0 < marked <= 3  # the rest read with weights_only=True and DeepSpeed's globals allowed


def test_the_runbook_json_names_and_warns_a_command_that_runs_pickles():
    proc = run("runbook", "DS-M102", "--json")
    steps = json.loads(proc.stdout)["page"]["verify"]
    assert [s["runs_checkpoint_code"] for s in steps] == [False, True]
    assert "weights_only=False" in steps[1]["command"] and "WARNING: runs the file's pickled code" in steps[1]["shows"]
