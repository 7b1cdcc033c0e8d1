"""The model and optimizer probes against the real baselines (tests/probe_checkpoints.py): the
saved names and shapes vs --model, the saved optimizer vs --optimizer / --param-groups."""

import json
import os
import struct

import pytest

from tests import probe_checkpoints as pc
from triage.errors import BadInput
from triage.probe import checks, verdict
from triage.probe.context import ProbeContext
from triage.probe.model_file import read_model, saved_shapes
from triage.probe.result import CONFIRMED, INCONCLUSIVE, REFUTED
from triage.probe.safe_pickle import read_shard
from triage.probe.target import from_args

pytestmark = pytest.mark.slow


def probe(name, root, **target):
    ctx = ProbeContext.for_path(str(root), from_args(None, None, None, **target))
    return checks.run(ctx, [name])[name]


def real_shapes(case_id):
    """The baseline model's names and shapes, as the safe reader sees them in its model-states file."""
    root = pc.scenario(case_id)
    shard = sorted((root / "global_step3").glob("*model_states.pt"))[0]
    shapes, _ = saved_shapes(read_shard(str(shard)))
    return {k: list(v) for k, v in shapes.items()}


def write(tmp_path, name, shapes):
    path = tmp_path / name
    path.write_text(json.dumps(shapes))
    return str(path)


@pytest.mark.parametrize("case_id", [pc.HEALTHY, pc.ZERO3])
def test_model_unchanged_is_refuted(case_id, tmp_path):
    shapes = real_shapes(case_id)
    assert len(shapes) == 10 and shapes["head.weight"] == [8, 128]  # ZeRO-3 too: param_shapes, not the empty params
    result = probe("model", pc.scenario(case_id), model=write(tmp_path, "same.json", shapes))
    assert result.status == REFUTED, result.evidence
    assert result.evidence[0] == "all 10 names and shapes match"


def test_model_with_a_changed_shape_and_a_renamed_key_is_confirmed(tmp_path):
    shapes = real_shapes(pc.HEALTHY)
    shapes["head.weight"] = [10, 128]
    shapes["blocks.3.proj.bias"] = shapes.pop("blocks.3.bias")
    result = probe("model", pc.scenario(pc.HEALTHY), model=write(tmp_path, "changed.json", shapes))
    assert result.status == CONFIRMED
    assert result.signals == ["missing_keys", "unexpected_keys", "shapes_differ"]
    assert result.facts["missing"] == ["blocks.3.proj.bias"]
    assert result.facts["unexpected"] == ["blocks.3.bias"]
    assert result.facts["shapes_differ"] == ["head.weight"]
    assert "head.weight saved [8, 128] vs model [10, 128]" in " ".join(result.evidence)
    assert result.command.startswith("diff <(ds-triage inspect --shapes ")


@pytest.mark.parametrize("prefix,signal", [("module.", "prefix_module"), ("_orig_mod.", "prefix_orig_mod"),
                                           ("base_model.model.", "prefix_peft")])
def test_a_wrapper_prefix_is_recognised(prefix, signal, tmp_path):
    shapes = {prefix + k: v for k, v in real_shapes(pc.HEALTHY).items()}
    result = probe("model", pc.scenario(pc.HEALTHY), model=write(tmp_path, "prefixed.json", shapes))
    assert result.signals == [signal]  # nothing else differs once the prefix is removed
    assert f"the model's names carry the `{prefix}` prefix, the checkpoint's do not" in result.evidence[0]


def test_model_from_yaml_and_from_a_torch_state_dict(tmp_path):
    shapes = real_shapes(pc.HEALTHY)
    yaml_path = tmp_path / "model.yaml"
    yaml_path.write_text("".join(f"{k}: {v}\n" for k, v in shapes.items()))
    assert probe("model", pc.scenario(pc.HEALTHY), model=str(yaml_path)).status == REFUTED
    import torch
    state = {k: torch.zeros(v) for k, v in shapes.items()}
    state["head.weight"] = torch.zeros(9, 128)
    torch.save({"state_dict": state}, tmp_path / "model.pt")
    read = read_model(str(tmp_path / "model.pt"))
    assert read.kind == "state_dict" and read.shapes["head.weight"] == (9, 128)
    assert read.notes == ["the state dict is under the `state_dict` key of the file"]
    result = probe("model", pc.scenario(pc.HEALTHY), model=str(tmp_path / "model.pt"))
    assert result.signals == ["shapes_differ"]


def test_safetensors_header_is_read_with_the_stdlib(tmp_path):
    header = {"__metadata__": {"format": "pt"},
              "head.weight": {"dtype": "F32", "shape": [8, 128], "data_offsets": [0, 4096]},
              "head.bias": {"dtype": "F32", "shape": [8], "data_offsets": [4096, 4128]}}
    raw = json.dumps(header).encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 4128)
    read = read_model(str(path))
    assert read.kind == "safetensors" and read.shapes == {"head.weight": (8, 128), "head.bias": (8,)}
    result = probe("model", pc.scenario(pc.HEALTHY), model=str(path))
    assert result.signals == ["unexpected_keys"] and len(result.facts["unexpected"]) == 8
    path.write_bytes(struct.pack("<Q", 10 ** 12) + raw)
    with pytest.raises(BadInput, match="header of"):
        read_model(str(path))


def _worker_model(tmp_path, variant):
    """The names and shapes of a corpus worker model variant, written by corpus/workers/model_shapes.py
    (it builds the real torch module)."""
    import subprocess
    import sys

    out = tmp_path / f"{variant}.json"
    subprocess.run([sys.executable, str(pc.ROOT / "corpus" / "workers" / "model_shapes.py"), variant, str(out)],
                   check=True)
    return str(out)


def test_a_renamed_module_is_named_and_fails_verify(cli, tmp_path):
    """The corpus's silent load (blocks renamed trunk, loaded with strict=False: DeepSpeed keeps the
    random init without a word): the checkpoint is sound, the model the job builds is not."""
    renamed = _worker_model(tmp_path, "renamed")
    result = probe("model", pc.scenario(pc.HEALTHY), model=renamed)
    assert result.status == CONFIRMED
    assert result.signals == ["renamed_module", "missing_keys", "unexpected_keys"]
    assert result.facts["renamed"] == [{"checkpoint": "blocks", "model": "trunk", "tensors": 8}]
    assert result.evidence[0].startswith("`blocks.*` in the checkpoint is `trunk.*` in your model (8 tensors")
    failed = cli("verify", pc.scenario(pc.HEALTHY), "--model", renamed, "--json")
    assert failed.returncode == 1
    assert any("renamed module" in p for p in json.loads(failed.stdout)["problems"])
    same = cli("verify", pc.scenario(pc.HEALTHY), "--model", _worker_model(tmp_path, "base"))
    assert same.returncode == 0, same.stdout


def test_a_rename_needs_two_pairs_with_the_same_shapes():
    from triage.probe.checks.model import module_renames

    saved = {"enc.0.w": [4, 4], "enc.1.w": [4, 4], "head.w": [2, 4]}
    built = {"dec.0.w": [4, 4], "dec.1.w": [8, 4], "head.w": [2, 4]}
    # one pair with the same shape is a coincidence, not a rename
    assert module_renames(["dec.0.w", "dec.1.w"], ["enc.0.w", "enc.1.w"], built, saved) == []
    built["dec.1.w"] = [4, 4]
    assert module_renames(["dec.0.w", "dec.1.w"], ["enc.0.w", "enc.1.w"], built, saved) == [("enc", "dec", 2)]


def test_bad_model_files_are_bad_input(tmp_path):
    for name, text in (("list.json", "[1, 2]"), ("shape.json", '{"a": "big"}'), ("broken.json", "{")):
        (tmp_path / name).write_text(text)
        with pytest.raises(BadInput, match="--model"):
            read_model(str(tmp_path / name))


def test_a_fifo_as_model_is_refused_without_opening_it(cli, tmp_path):
    """Opening a FIFO blocks until a writer comes: the CLI must refuse it at once (exit 3, one line)."""
    fifo = tmp_path / "model.json"
    os.mkfifo(fifo)
    proc = cli("probe", pc.scenario(pc.HEALTHY), "--model", fifo)
    assert proc.returncode == 3 and b"a FIFO, not a regular file" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1


def test_model_is_inconclusive_without_a_model():
    assert probe("model", pc.scenario(pc.HEALTHY)).status == INCONCLUSIVE


@pytest.mark.parametrize("case_id", [pc.HEALTHY, pc.ZERO3])
def test_optimizer_type_and_param_groups(case_id):
    root = pc.scenario(case_id)
    result = probe("optimizer", root, optimizer="SGD")
    assert result.status == CONFIRMED and result.signals == ["type_differs"]
    assert "saved AdamW" in result.evidence[0] and "decoupled_weight_decay=True" in result.evidence[0]
    assert result.command.startswith("ds-triage inspect --optimizer ")
    assert probe("optimizer", root, optimizer="AdamW").status == REFUTED
    assert probe("optimizer", root, optimizer="torch.optim.AdamW", param_groups=1).status == REFUTED
    assert probe("optimizer", root, optimizer="Adam").signals == ["type_differs"]  # same state, other update rule
    groups = probe("optimizer", root, param_groups=2)
    assert groups.signals == ["groups_differ"] and "saved 1" in groups.evidence[0]
    assert probe("optimizer", root).status == INCONCLUSIVE


def test_verdict_decides_model_and_optimizer_hypotheses(tmp_path):
    root = pc.scenario(pc.HEALTHY)
    ctx = ProbeContext.for_path(str(root), from_args(None, None, None, optimizer="SGD", model=write(
        tmp_path, "m.json", {"_orig_mod." + k: v for k, v in real_shapes(pc.HEALTHY).items()})))
    results = checks.run(ctx, ["model", "optimizer"])
    assert verdict.decide("optimizer_mismatch", "DS-O001", results).status == CONFIRMED
    assert verdict.decide("optimizer_mismatch", "DS-O002", results).status == INCONCLUSIVE  # no --param-groups
    assert verdict.decide("model_mismatch", "DS-M002", results).status == CONFIRMED
    assert verdict.decide("model_mismatch", "DS-M001", results).status == CONFIRMED
    assert set(verdict.findings(results)) == {"model_mismatch", "optimizer_mismatch"}
    ctx = ProbeContext.for_path(str(root), from_args(None, None, None, optimizer="AdamW", param_groups=1,
                                                     model=write(tmp_path, "same.json", real_shapes(pc.HEALTHY))))
    results = checks.run(ctx, ["model", "optimizer"])
    for rule in ("DS-O001", "DS-O002"):
        assert verdict.decide("optimizer_mismatch", rule, results).status == REFUTED
    assert verdict.decide("model_mismatch", "DS-M001", results).status == REFUTED
    assert verdict.decide("model_mismatch", "DS-M003", results).status == INCONCLUSIVE  # a load-code mistake too


def test_triage_reads_the_optimizer_from_the_log(cli):
    """The log's `DeepSpeed Basic Optimizer = SGD` against the AdamW baseline: no flag needed."""
    log = pc.ROOT / "corpus" / "cases" / "zero2-dp1-adamw-saved-sgd-load.log"
    proc = cli("triage", "--log", log, "--ckpt", pc.scenario(pc.HEALTHY), "--json")
    data = json.loads(proc.stdout)
    assert data["verdict"]["rule_id"] == "DS-O001", data["verdict"]
    assert data["target"]["optimizer"] == "SGD" and data["target"]["sources"]["optimizer"].startswith("the log, line")


def test_triage_confirms_the_optimizer_class_change(cli):
    log = pc.ROOT / "corpus" / "cases" / "zero2-dp1-adamw-saved-sgd-load.log"
    proc = cli("triage", "--log", log, "--ckpt", pc.scenario(pc.HEALTHY), "--optimizer", "SGD", "--json")
    data = json.loads(proc.stdout)
    assert proc.returncode == 0, data["verdict"]
    assert data["verdict"]["category"] == "optimizer_mismatch", data["verdict"]
    assert data["target"]["optimizer"] == "SGD"
    proc = cli("triage", "--log", log, "--ckpt", pc.scenario(pc.HEALTHY), "--optimizer", "AdamW", "--json")
    data = json.loads(proc.stdout)
    status = {h["rule_id"]: h["status"] for h in data["hypotheses"]}
    assert status.get("DS-O001") == "refuted", status


def test_cli_bad_model_is_exit_3_and_bad_param_groups_exit_2(cli, tmp_path):
    (tmp_path / "bad.json").write_text('["not", "a", "mapping"]')
    proc = cli("probe", pc.scenario(pc.HEALTHY), "--model", tmp_path / "bad.json")
    assert proc.returncode == 3 and b"--model" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert cli("probe", pc.scenario(pc.HEALTHY), "--param-groups", "0").returncode == 2
