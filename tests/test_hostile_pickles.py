"""Issue 16, bounds: shard metadata built to exhaust memory or time is reported as suspicious
(naming the cap it broke), never a crash, never exit 70, never more than 1 GiB; one shard's
pickle cannot change how another is read; absurd degrees and layer indices build no range.

Every hostile shard is a REAL DeepSpeed shard (a copy of the healthy baseline) with one hostile
value added to its pickle (tests/hostile/pickles.py). The probe runs as the CLI, in a child
whose address space is capped at 1 GiB: going over it would fail the run, not just be slow.
"""

import json
import resource
import subprocess
import sys
import zipfile

import pytest

from tests import probe_checkpoints as pc
from tests.hostile import pickles as hp
from triage.probe.pickle_bounds import prescan
from triage.probe.safe_pickle import ALLOWED, _RestrictedUnpickler

GiB = 1 << 30
TIMEOUT = 120  # a hostile shard is read in a few seconds; the cap only catches a hang
MODEL = "global_step3/mp_rank_00_model_states.pt"
OPTIM = "global_step3/zero_pp_rank_0_mp_rank_00_optim_states.pt"


def _one_gib():
    resource.setrlimit(resource.RLIMIT_AS, (GiB, GiB))


def probe(root) -> tuple[subprocess.CompletedProcess, dict]:
    proc = subprocess.run([sys.executable, "-m", "triage", "probe", str(root), "--json"], cwd=pc.ROOT,
                          capture_output=True, text=True, timeout=TIMEOUT, preexec_fn=_one_gib)
    assert proc.returncode != 70 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    return proc, {p["name"]: p for p in json.loads(proc.stdout)["probes"]}


OVER_CAP = {  # name: (the value added to the model-states file's pickle, the cap it must name)
    "empty_sets": ("client", hp.empty_sets(5_000_000), "containers"),  # ~1 GiB of sets if unpickled
    "opcodes": ("client", b"(" + b"N" * 1_200_000 + b"l", "opcodes"),
    "huge_int": ("client", hp.huge_int(8 << 20), "integer"),
    "huge_text": ("client", hp.huge_text(8 << 20), "string or bytes"),
    "deep_list": ("client", hp.deep_list(200_000), "nesting deeper"),
    "deep_tuple_key": ("client", hp.deep_tuple_key(200_000), "nesting deeper"),
    "cyclic_ds_config": ("ds_config", hp.cyclic_dict(), "cyclic"),
    "huge_memo_index": ("client", hp.huge_memo_index(), "memo index"),
}


@pytest.mark.parametrize("case", sorted(OVER_CAP))
def test_a_shard_over_a_cap_is_suspicious_never_a_crash(case):
    key, value, cap = OVER_CAP[case]
    root = pc.copy_of(pc.HEALTHY, f"over-cap-{case}")
    hp.add_key(root / MODEL, key, value)
    proc, probes = probe(root)
    integrity = probes["integrity"]
    assert integrity["status"] == "confirmed" and "suspicious_pickle" in integrity["signals"], integrity
    finding = next(e for e in integrity["evidence"] if e.startswith("mp_rank_00_model_states.pt:"))
    assert "safe reader's cap" in finding and cap in finding, finding
    assert proc.returncode == 1


def test_the_caps_leave_every_real_shard_alone():
    shards = sorted(pc.baselines().glob("*/global_step*/*.pt"))
    assert len(shards) >= 8
    for shard in shards:
        with zipfile.ZipFile(shard) as zf:
            prescan(zf.read(hp.data_pkl_name(zf)))  # raises OverCap if a cap were too tight


def test_one_shards_pickle_cannot_change_how_another_is_read():
    root = pc.copy_of(pc.HEALTHY, "restyled-storage")
    hp.add_key(root / MODEL, "client", hp.restyled_storage_type())

    # The attack is real: the BUILD does change the object find_class handed to this file ...
    with zipfile.ZipFile(root / MODEL) as zf:
        unpickler = _RestrictedUnpickler(zf.read(hp.data_pkl_name(zf)))
    restyled = unpickler.load()["client"]
    assert restyled.dtype == "float64"
    # ... but that object is this file's own: the shared table and the next file are untouched.
    assert ALLOWED[("torch", "FloatStorage")].dtype == "float32"
    with zipfile.ZipFile(root / OPTIM) as zf:
        other = _RestrictedUnpickler(zf.read(hp.data_pkl_name(zf)))
    other.load()
    assert {s.dtype for s in other.storages.values()} == {"float32"}

    # Through the CLI, the healthy optimizer shards read after it are not called truncated
    # (before the fix: "holds 4 bytes, the pickle needs 8 (1 x float64)", storage_missing).
    proc, probes = probe(root)
    integrity = probes["integrity"]
    assert "storage_missing" not in integrity["signals"], integrity["evidence"]
    assert integrity["status"] == "refuted", integrity
    assert proc.returncode == 0


def test_an_absurd_saved_world_size_builds_no_range_and_is_reported():
    root = pc.copy_of(pc.HEALTHY, "absurd-dp")
    hp.add_key(root / MODEL, "dp_world_size", hp.small_int(10 ** 10))
    _proc, probes = probe(root)
    evidence = " ".join(probes["completeness"]["evidence"])
    assert "dp degree 10000000000 is absurd" in evidence, evidence


def test_an_absurd_layer_file_name_builds_no_range_and_is_reported():
    root = pc.copy_of(pc.HEALTHY, "absurd-layer")
    (root / "global_step3" / "layer_9999999999-model_states.pt").write_bytes(b"")
    _proc, probes = probe(root)
    completeness = probes["completeness"]
    assert "layer_missing" in completeness["signals"]
    evidence = " ".join(completeness["evidence"])
    assert "layer file numbered 9999999999: absurd" in evidence and "(9999999999 in all)" in evidence, evidence


def test_a_model_file_over_a_cap_is_bad_input_in_one_line():
    from triage.errors import EXIT_BAD_INPUT

    root = pc.copy_of(pc.HEALTHY, "over-cap-model")
    model = hp.add_key(root / MODEL, "client", hp.deep_list(200_000))
    proc = subprocess.run([sys.executable, "-m", "triage", "probe", str(root), "--model", str(model)], cwd=pc.ROOT,
                          capture_output=True, text=True, timeout=TIMEOUT, preexec_fn=_one_gib)
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "nesting deeper than 100" in proc.stderr, proc.stderr


def test_a_string_with_an_invalid_escape_warns_nothing_even_under_w_error():
    """A protocol-0 STRING opcode holding `\\h`: pickletools and pickle warn of it (DeprecationWarning),
    which `-W error` or PYTHONWARNINGS=error would turn into a traceback out of the probe."""
    import warnings

    from triage.probe.safe_pickle import read_shard

    root = pc.copy_of(pc.HEALTHY, "invalid-escape")
    hp.add_key(root / MODEL, "client", b"S'\\h'\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        meta = read_shard(str(root / MODEL))
    assert meta.error is None and meta.ds_config, meta.error  # the rest of the shard is read as before
