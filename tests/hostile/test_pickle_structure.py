"""Issue 40, findings 4, 7 and 8b: pickles that are small on disk and unbounded to hash or print, a
legacy `.pt` whose storage keys pickle runs code, a zip record that declares 100 GB in a sparse file.

Each hostile file is a REAL DeepSpeed shard (a copy of a baseline, tests/probe_checkpoints.py) with one
edit (tests/hostile/pickles.py). Every command that reads the shard runs as the CLI, in a child capped
at 2 GiB of address space, with a timeout that only catches a hang: each must exit with its documented
code, print no traceback, never run the payload, and name the file.

Before the fix (the tree at the commit before it, run by pointing DS_TRIAGE_SOURCE at a copy of it):
the tuple DAG key hangs every command in the unpickler's SETITEM (hash of 100^6 nodes), and so does a DAG
hashed again as the key of 10,000 dicts; 60,000 distinct keys of one hash cost ~100 s of comparisons a
read, and `probe` then calls the shard fine; the list DAGs as `ds_version` hang `probe` and `verify` in
str(); the legacy payload is called safe by the gate and runs under `repair fp32 --apply`, and so does a
legacy file that is also a tar archive (torch unpickles its member); the sparse record makes `probe` and
`verify` call the checkpoint healthy and `probe --deep` and `manifest` read 100 GB of zeros.
"""

from __future__ import annotations

import os
import pickle
import resource
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests import probe_checkpoints as pc
from tests.hostile import payloads
from tests.hostile import pickles as hp
from triage.errors import EXIT_UNTRUSTED
from triage.probe.pickle_bounds import MAX_NODES, OverCap, check_graph, prescan, shown

SOURCE = Path(os.environ.get("DS_TRIAGE_SOURCE", pc.ROOT))  # the tree under test (a copy of an older one)
CAP = 2 << 30  # address space of each command
TIMEOUT = 120  # a hang guard on a busy 2-core machine: each command takes a few seconds
LAYOUT = "z2-dp2-fp32"
MODEL = "mp_rank_00_model_states.pt"
LOG = pc.ROOT / "corpus" / "cases" / "job-zero2-dp2-saved-load-dp1-default-log-level.log"
CAPPED = "shared references counted each time"


def _zip_key(key: str, value: bytes):
    def build(root: Path, marker: Path) -> Path:
        return hp.add_key(root / payloads.TAG / MODEL, key, value)
    return build


def _legacy_keys_payload(root: Path, marker: Path) -> Path:
    shard = payloads.legacy_clean(root)  # re-saved by real torch in the legacy format
    return hp.splice_storage_keys(shard, pickle.dumps(payloads.MarkerPayload(marker), protocol=2))


def _legacy_tar(root: Path, marker: Path) -> Path:
    shard = payloads.legacy_clean(root)
    return hp.tar_polyglot(shard, pickle.dumps(payloads.MarkerPayload(marker), protocol=2))


def _sparse(root: Path, marker: Path) -> Path:
    return hp.sparse_record(root / payloads.TAG / MODEL)


# A shard the readers refuse: probe and verify find it (1), the dry run plans and says --apply will refuse
# (0), every real load is refused (5), manifest refuses a broken tag (1); triage's code is its verdict's.
REFUSED = {"probe": 1, "probe --deep": 1, "verify": 1, "triage": (0, 1), "repair fp32": 0,
           "repair fp32 --apply": EXIT_UNTRUSTED, "manifest": 1, "probe --reproduce": EXIT_UNTRUSTED}
# The probes do not follow a legacy file ("not checked"), nor does manifest (it hashes, loads nothing): the gate
# in front of every real load reads all five of its pickles.
LEGACY = {"probe": 0, "probe --deep": 0, "manifest": 0}
CASES = {  # name: (builder, what the finding says, exit codes that differ from REFUSED)
    "tuple_dag_key": (_zip_key("client", hp.dag_key()), CAPPED, {}),
    "list_dag_ds_version": (_zip_key("ds_version", hp.list_dag()), CAPPED, {}),
    "late_list_dag_ds_version": (_zip_key("ds_version", hp.late_list_dag()), CAPPED, {}),
    "repeated_dag_key": (_zip_key("client", hp.repeated_key()), "nodes hashed", {}),
    "colliding_int_keys": (_zip_key("client", hp.colliding_keys()), "keys that share a hash", {}),
    "legacy_storage_keys_payload": (_legacy_keys_payload, "builtins.exec (in the storage keys)", LEGACY),
    "legacy_tar_polyglot": (_legacy_tar, "also a tar archive", LEGACY),
    # not whole: repair plans nothing (1)
    "sparse_100gb_record": (_sparse, "declares 100000000000 bytes", {"repair fp32": 1, "repair fp32 --apply": 1}),
}


def _capped():
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


def command_lines(root: Path, out: Path) -> dict[str, list[str]]:
    return {"probe": ["probe", root], "probe --deep": ["probe", root, "--deep"], "verify": ["verify", root],
            "triage": ["triage", "--log", LOG, "--ckpt", root], "repair fp32": ["repair", "fp32", root, "--out", out],
            "repair fp32 --apply": ["repair", "fp32", root, "--out", out, "--apply"], "manifest": ["manifest", root],
            "probe --reproduce": ["probe", root, "--reproduce"]}


def run(args) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(SOURCE), NO_COLOR="1", DS_ACCELERATOR="cpu")
    return subprocess.run([sys.executable, "-m", "triage", *map(str, args)], cwd=SOURCE, env=env, text=True,
                          capture_output=True, timeout=TIMEOUT, preexec_fn=_capped)


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_reading_command_refuses_it_and_ends(case, tmp_path):
    build, finding, codes = CASES[case]
    root = payloads.copy_baseline(LAYOUT, tmp_path / "ckpt")
    marker = tmp_path / "payload-ran"
    planted = build(root, marker)
    for name, args in command_lines(root, tmp_path / "out").items():
        proc = run(args)
        output = proc.stdout + proc.stderr
        expected = {**REFUSED, **codes}[name]
        assert proc.returncode in (expected if isinstance(expected, tuple) else (expected,)), (name, output[-3000:])
        assert "Traceback" not in output, (name, output[-3000:])
        assert not marker.exists(), f"{name}: the payload ran"
        if proc.returncode:  # what refused it names the file, and why
            assert planted.name in output and finding in output, (name, output[-3000:])
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- the reader itself, in process

def test_the_logical_size_is_exact_for_a_dag_filled_after_it_was_shared():
    """prescan counts a container's size when it is used; one filled later is caught on the loaded graph."""
    prescan(b"\x80\x02" + hp.late_list_dag() + b".")  # too small to the stream walk ...
    graph = pickle.loads(b"\x80\x02" + hp.late_list_dag() + b".")  # (plain data: pickle itself may load it)
    with pytest.raises(OverCap, match=CAPPED):  # ... 100^6 nodes to the graph walk
        check_graph(graph)
    check_graph(pickle.loads(b"\x80\x02" + hp.late_list_dag(3, 100) + b"."))  # 10^6: under MAX_NODES
    assert MAX_NODES < 100 ** 4


@pytest.mark.parametrize("pairs", [False, True])
def test_keys_of_one_hash_are_refused_before_they_are_inserted(pairs):
    """The same 60,000 colliding keys, set by SETITEMS (counted by prescan) or handed to OrderedDict by a call
    (counted by the stand-in before it inserts them); 1,000 of them pass."""
    from triage.probe.safe_pickle import _RestrictedUnpickler

    data = b"\x80\x02" + hp.colliding_keys(pairs=pairs) + b"."
    with pytest.raises(OverCap, match="share a hash"):
        prescan(data)
        _RestrictedUnpickler(data).load()
    few = b"\x80\x02" + hp.colliding_keys(1000, pairs=pairs) + b"."
    prescan(few)
    assert len(_RestrictedUnpickler(few).load()) == 1000


def test_calls_share_one_count_of_their_keys_comparisons_which_a_pickle_cannot_reset():
    """2,000 colliding pairs (2 * 10^6 comparisons, under the cap) handed to OrderedDict ten times: the third
    call goes over, counted across the file's calls; and BUILD on the stand-in (to reset its count) fails."""
    from triage.probe.safe_pickle import _RestrictedUnpickler

    slot = (hp.HIGH_MEMO).to_bytes(4, "little")
    pairs = b"(" + b"".join(hp.small_int(k * (2 ** 61 - 1) + 5) + b"K\x01\x86" for k in range(1, 2001)) + b"lr" + slot
    calls = (b"ccollections\nOrderedDict\n(j" + slot + b"tR0") * 10
    data = b"\x80\x02" + pairs + b"0" + calls + b"N."
    prescan(data)  # no dict or set in the stream itself
    assert _RestrictedUnpickler(b"\x80\x02" + pairs + b"0" + calls[:len(calls) // 5] + b"N.").load() is None
    with pytest.raises(OverCap, match="share a hash"):
        _RestrictedUnpickler(data).load()
    with pytest.raises(pickle.UnpicklingError, match="cannot be set"):
        _RestrictedUnpickler(b"\x80\x02ccollections\nOrderedDict\n}b.").load()


def test_what_is_shown_of_a_value_is_cut_short_without_expanding_it():
    dag = pickle.loads(b"\x80\x02" + hp.late_list_dag() + b".")
    text = shown(dag)
    assert len(text) == 80 and text.startswith("[[[[[[[1]") and text.endswith("..."), text
    assert shown("0.19.8") == "'0.19.8'" and shown({"a": (1, 2.5, None)}) == "{'a': (1, 2.5, None)}"


def test_the_legacy_storage_keys_must_be_the_objects_storage_keys(tmp_path):
    """No payload, but not the shape torch expects: a key the object has no storage for is unverifiable."""
    from triage.probe import trust

    root = payloads.copy_baseline("z2-dp1-fp32", tmp_path / "ckpt")
    shard = hp.splice_storage_keys(payloads.legacy_clean(root), pickle.dumps(["not-a-storage"], protocol=2))
    [bad] = trust.scan(str(root / payloads.TAG)).untrusted
    assert (bad.name, bad.verdict) == (shard.name, "unverifiable"), bad
    assert "the storage keys is not a list of the object's storage keys" in bad.detail, bad.detail


def test_a_legacy_file_that_is_also_a_tar_archive_runs_its_member_under_torch(tmp_path):
    """Why the legacy reader refuses a tar header: real torch takes the file for a tar archive and unpickles
    its `storages` member, while the five legacy pickles the reader follows are clean."""
    import torch

    from triage.probe.legacy_pickle import read_legacy_shard

    root = payloads.copy_baseline("z2-dp1-fp32", tmp_path / "ckpt")
    marker = tmp_path / "payload-ran"
    shard = _legacy_tar(root, marker)
    meta = read_legacy_shard(str(shard))
    assert "also a tar archive" in meta.error and not meta.suspicious, meta
    with pytest.raises(TypeError):  # after the payload: its None is not a storage count
        torch.load(shard, weights_only=False)  # our own marker payload, on purpose
    assert marker.exists()


def test_a_record_declaring_more_than_any_torch_archive_is_refused_unread(tmp_path):
    from triage.probe import zipcheck
    from triage.probe.safe_pickle import read_shard
    from triage.probe.tensor_data import Archive

    root = payloads.copy_baseline(LAYOUT, tmp_path / "ckpt")
    shard = hp.sparse_record(root / payloads.TAG / MODEL)
    assert os.stat(shard).st_blocks * 512 < 1 << 20 < os.stat(shard).st_size  # sparse: a 100 GB hole
    result = zipcheck.check(str(shard), deep=True)
    assert result.problem == "bad_zip" and "over the 64 GiB a record may hold" in result.detail, result
    assert "refused unread" in read_shard(str(shard)).error
    with pytest.raises(zipfile.BadZipFile, match="declares 100000000000 bytes"):
        Archive(str(shard))


def test_every_real_shard_is_under_the_structure_caps():
    from triage.probe.safe_pickle import _RestrictedUnpickler

    shards = sorted(pc.baselines().glob("*/global_step*/*.pt"))
    assert len(shards) >= 8
    for shard in shards:
        with zipfile.ZipFile(shard) as zf:
            data = zf.read(hp.data_pkl_name(zf))
        prescan(data)  # raises OverCap if a cap were too tight
        check_graph(_RestrictedUnpickler(data).load())
