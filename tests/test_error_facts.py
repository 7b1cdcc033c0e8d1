"""Facts from a load error's message (triage/analysis/error_facts.py), on errors raised for real here:
a missing file of each kind opened by Python, torch and DeepSpeed's own path checks, a file where a
directory should be, truncated pickles, zips and safetensors read by the real readers, and a pickle
naming a class its module does not have."""

import os
import pickle
import struct

import pytest

from triage.analysis.error_facts import FACTS, which_file
from triage.analysis.error_facts import facts as facts_of
from triage.logs.parse import parse


def raised(call) -> str:
    """What the log of a job whose code made `call` would end with: real type, real message."""
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - whatever the real reader raises is the point
        kind = type(exc)
        name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
        return f"Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n{name}: {exc}"
    raise AssertionError("no error raised")


def facts(log: str) -> set[tuple[str, str | None]]:
    incident, _ = parse(log)
    exceptions = [e for chain in incident.chains for e in chain.exceptions]
    return {(s.name, s.qualifier) for s in facts_of(exceptions)}


@pytest.mark.parametrize("name, kind", [
    ("latest", "latest"), ("latest_universal", "latest"),
    ("global_step3/mp_rank_00_model_states.pt", "model_states"),
    ("global_step3/zero_pp_rank_1_mp_rank_00_model_states.pt", "zero_model_states"),
    ("global_step3/zero_pp_rank_1_mp_rank_00_optim_states.pt", "optim_states"),
    ("global_step3/bf16_zero_pp_rank_3_mp_rank_00_optim_states.pt", "optim_states"),
    ("global_step3/layer_01-model_00-model_states.pt", "layer_file"),
    ("global_step3/zero/fc1.weight/fp32.pt", "universal"),
    ("global_step3", "tag_dir"),
    ("checkpoint-500/trainer_state.json", "framework"), ("checkpoint-500/pytorch_model", "framework"),
    ("ds_config.json", "config"), ("notes.txt", "other"),
])
def test_which_file_a_real_missing_path_names(tmp_path, name, kind):
    path = tmp_path / "ckpt" / name
    log = raised(lambda: open(path, "rb"))  # what torch.load, zero_to_fp32 and Python's open print
    assert ("missing", kind) in facts(log)
    if "zero_pp_rank_" in name and kind == "optim_states":
        assert which_file(str(path))[1] == {"rank": int(name.split("zero_pp_rank_")[1].split("_")[0])}


def test_a_file_given_where_a_directory_is_expected(tmp_path):
    shard = tmp_path / "mp_rank_00_model_states.pt"
    shard.write_bytes(b"x")
    assert ("not_a_directory", "file") in facts(raised(lambda: os.listdir(shard)))
    assert ("is_a_directory", "directory") in facts(raised(lambda: open(tmp_path, "rb")))


def test_deepspeeds_own_missing_checkpoint_message(tmp_path):
    """zero_to_fp32's refusal when the tag dir does not exist, raised by the real converter."""
    pytest.importorskip("deepspeed")
    from deepspeed.utils.zero_to_fp32 import get_model_state_file

    log = raised(lambda: get_model_state_file(str(tmp_path / "global_step9"), 2))
    assert ("missing", "tag_dir") in facts(log)


def test_truncated_pickle_zip_and_safetensors_read_by_the_real_readers(tmp_path):
    torch = pytest.importorskip("torch")
    whole = tmp_path / "whole.pt"
    torch.save({"w": torch.zeros(64)}, whole)
    cut = tmp_path / "cut.pt"
    cut.write_bytes(whole.read_bytes()[:300])
    assert ("truncated", "zip") in facts(raised(lambda: torch.load(cut, weights_only=True)))
    legacy = tmp_path / "legacy.pt"
    torch.save({"w": torch.zeros(64)}, legacy, _use_new_zipfile_serialization=False)
    legacy_cut = tmp_path / "legacy-cut.pt"
    legacy_cut.write_bytes(legacy.read_bytes()[:40])
    assert ("truncated", "pickle") in facts(raised(lambda: torch.load(legacy_cut, weights_only=False)))
    data = pickle.dumps({"step": 3, "w": list(range(50))})
    assert ("truncated", "pickle") in facts(raised(lambda: pickle.loads(data[:-10])))
    assert ("truncated", "pickle") in facts(raised(lambda: pickle.loads(b"")))  # EOFError: Ran out of input
    assert ("truncated", "pickle") in facts(raised(lambda: pickle.loads(b"<html>")))  # invalid load key
    safetensors = pytest.importorskip("safetensors.torch")
    garbage = tmp_path / "model.safetensors"
    garbage.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    assert ("truncated", "safetensors") in facts(raised(lambda: safetensors.load_file(garbage)))


def test_a_pickle_naming_a_class_its_module_lacks():
    # a pickle whose GLOBAL names json.NoSuchEncoder: what an older release's class looks like to a newer one
    data = b"\x80\x04\x95\x1a\x00\x00\x00\x00\x00\x00\x00\x8c\x04json\x94\x8c\rNoSuchEncoder\x94\x93\x94."
    found = facts(raised(lambda: pickle.loads(data)))
    assert ("pickled_class", "json") in found


def test_no_fact_from_an_unrelated_error():
    assert facts(raised(lambda: [][1])) == set()
    assert facts(raised(lambda: {}["optimizer_state_dict"])) == set()


def test_every_fact_is_documented():
    from triage.analysis import error_facts

    names = {s.name for s in error_facts.facts([]) or []} | set(FACTS)
    assert names == set(FACTS)
