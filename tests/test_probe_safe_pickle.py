"""The restricted metadata reader: DeepSpeed's metadata out of real shards, no tensor bytes,
and a crafted shard whose pickle would write a file is reported and never run."""

import json
import os
import pickle
import subprocess
import sys
import zipfile

import pytest

from tests import probe_checkpoints as pc
from triage.probe import checks
from triage.probe.context import ProbeContext
from triage.probe.safe_pickle import TensorMeta, read_shard

TAG = "global_step3"


def torch_zip(path, pickled: bytes, records: dict[str, bytes] | None = None, prefix="archive"):
    """A zip laid out as torch.save writes it (stored, `<prefix>/data.pkl` first)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr(f"{prefix}/data.pkl", pickled)
        zf.writestr(f"{prefix}/.format_version", "1")
        zf.writestr(f"{prefix}/byteorder", "little")
        for name, data in (records or {}).items():
            zf.writestr(f"{prefix}/data/{name}", data)
        zf.writestr(f"{prefix}/version", "3\n")
    return path


def exec_payload(target) -> bytes:
    """A pickle whose loading calls builtins.exec to write `target`."""
    class Evil:
        def __reduce__(self):
            return (exec, (f"open({str(target)!r}, 'w').write('pwned')",))

    return pickle.dumps({"ds_version": "0.19.8", "module": Evil(), "dp_world_size": 2}, protocol=2)


def nested_payload(target) -> bytes:
    """posix.system hidden inside an admitted global: torch._tensor._rebuild_from_type_v2(system, ...)."""
    cmd = f"touch {target}".encode()
    return (b"(Vds_version\nV0.19.8\nVmodule\nctorch._tensor\n_rebuild_from_type_v2\n(cposix\nsystem\nN(V" + cmd
            + b"\ntNtRd.")


@pytest.mark.parametrize("payload", [exec_payload, nested_payload])
def test_a_pickle_that_would_write_a_file_is_reported_and_never_run(payload, tmp_path):
    target = tmp_path / "pwned"
    shard = torch_zip(tmp_path / "zero_pp_rank_0_mp_rank_00_optim_states.pt", payload(target))
    meta = read_shard(str(shard))
    assert meta.error is None
    assert meta.suspicious and meta.suspicious[0] in ("builtins.exec", "posix.system")
    assert meta.ds_version == "0.19.8"
    assert not target.exists()

    # The control: an ordinary unpickler really runs it (in a child, on another path).
    control = tmp_path / "control"
    data = payload(control)
    code = "import pickle,sys; data=sys.stdin.buffer.read()\ntry: pickle.loads(data)\nexcept Exception: pass"
    subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, timeout=120)
    assert control.exists(), "the crafted pickle must be one that writes a file when loaded normally"
    assert not target.exists()


@pytest.mark.slow
def test_probe_flags_a_malicious_shard_in_a_real_checkpoint(tmp_path):
    target = tmp_path / "pwned"
    root = pc.copy_of(pc.HEALTHY, "malicious")
    torch_zip(root / TAG / "zero_pp_rank_1_mp_rank_00_optim_states.pt", exec_payload(target),
              prefix="zero_pp_rank_1_mp_rank_00_optim_states")
    proc = subprocess.run([sys.executable, "-m", "triage", "probe", str(root), "--json", "--deep"], cwd=pc.ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    integrity = next(p for p in report["probes"] if p["name"] == "integrity")
    assert integrity["status"] == "confirmed" and "suspicious_pickle" in integrity["signals"]
    assert "builtins.exec" in " ".join(integrity["evidence"])
    assert "unsafe_load_blocked" in report["findings"]
    subprocess.run([sys.executable, "-m", "triage.probe.safe_pickle", str(root / TAG /
                    "zero_pp_rank_1_mp_rank_00_optim_states.pt")], cwd=pc.ROOT, capture_output=True, timeout=60)
    assert not target.exists()


@pytest.mark.slow
def test_metadata_of_real_deepspeed_shards():
    tag = pc.scenario(pc.HEALTHY) / TAG
    model = read_shard(str(tag / "mp_rank_00_model_states.pt"))
    assert model.error is None and not model.suspicious
    assert (model.ds_version, model.dp_world_size, model.mp_world_size) == ("0.19.8", 2, 1)
    assert model.parallel_dimensions == {"pp_degree": 1, "tp_degree": 1}
    assert model.ds_config["zero_optimization"]["stage"] == 2
    assert model.param_shapes["blocks.0.weight"] == (128, 128)
    assert "blocks.0.weight" in model.module_keys
    assert model.storages and all(s.dtype == "float32" for s in model.storages.values())
    optim = read_shard(str(tag / "zero_pp_rank_0_mp_rank_00_optim_states.pt"))
    assert (optim.zero_stage, optim.partition_count, optim.optim_ds_version) == (2, [2], "0.19.8")
    assert "loss_scaler" in optim.optimizer_keys
    assert "deepspeed.runtime.fp16.loss_scaler.LossScaler" in optim.weights_only_refused
    zero3 = read_shard(str(pc.scenario(pc.ZERO3) / TAG / "zero_pp_rank_1_mp_rank_00_optim_states.pt"))
    assert (zero3.zero_stage, zero3.partition_count) == (3, 2)


def _bytes_read() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


def _tensor_pickle(key: str, numel: int, shape: tuple, storage: str = "FloatStorage") -> bytes:
    """{'ds_version': '0.19.8', 't': tensor} in pickle opcodes, the way torch.save refers to storages
    (a persistent id ('storage', torch.<Type>Storage, key, 'cpu', numel)), without torch."""
    ints = lambda values: b"(" + b"".join(b"I%d\n" % v for v in values) + b"t"  # noqa: E731
    stride = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        stride[i] = stride[i + 1] * shape[i + 1]
    persistent_id = b"(Vstorage\nctorch\n" + storage.encode() + b"\nV" + key.encode() + b"\nVcpu\nI%d\nt" % numel
    tensor = (b"ctorch._utils\n_rebuild_tensor_v2\n(" + persistent_id + b"QI0\n" + ints(shape) + ints(stride)
              + b"I00\nccollections\nOrderedDict\n(tRtR")
    return b"(Vds_version\nV0.19.8\nVt\n" + tensor + b"d."


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs /proc/self/io")
def test_cost_does_not_depend_on_tensor_size(tmp_path):
    """Same pickle, a 1 KiB vs a 64 MiB storage record: the reader reads the same few kilobytes."""
    def shard(name, numel):
        return torch_zip(tmp_path / name, _tensor_pickle("0", numel, (numel,)), {"0": bytes(numel * 4)})

    small, big = shard("small.pt", 256), shard("big.pt", 16 * 1024 * 1024)
    read_shard(str(small))  # warm imports
    costs = []
    for path in (small, big):
        before = _bytes_read()
        meta = read_shard(str(path))
        costs.append(_bytes_read() - before)
        assert meta.error is None and meta.ds_version == "0.19.8"
    assert os.path.getsize(big) > 60 * 1024 * 1024
    assert costs[1] < 64 * 1024 and abs(costs[1] - costs[0]) < 8 * 1024, costs


def test_tensors_are_recorded_not_loaded(tmp_path):
    meta = read_shard(str(torch_zip(tmp_path / "s.pt", _tensor_pickle("7", 12, (3, 4), "BFloat16Storage"),
                                    {"7": bytes(24)})))
    assert meta.error is None and not meta.suspicious
    assert meta.storages["7"].dtype == "bfloat16" and meta.storages["7"].nbytes == 24
    ctx_tensor = read_shard.__globals__["_rebuild_tensor_v2"](meta.storages["7"], 0, (3, 4))
    assert isinstance(ctx_tensor, TensorMeta) and ctx_tensor.shape == (3, 4) and ctx_tensor.numel == 12


def test_a_storage_record_shorter_than_its_tensor_is_corrupt(tmp_path):
    root = tmp_path / "ckpt"
    (root / TAG).mkdir(parents=True)
    (root / "latest").write_text(TAG)
    torch_zip(root / TAG / "mp_rank_00_model_states.pt", _tensor_pickle("0", 1000, (1000,)), {"0": bytes(400)})
    result = checks.run(ProbeContext.for_path(str(root)), ["integrity"])["integrity"]
    assert result.signals == ["storage_missing"], result.evidence


@pytest.mark.parametrize("content", [b"", b"\0" * 4096, os.urandom(4096), b"PK\x03\x04" + os.urandom(500),
                                     b"version https://git-lfs.github.com/spec/v1\noid sha256:ab\n"])
def test_bad_files_give_an_error_never_an_exception(content, tmp_path):
    path = tmp_path / "mp_rank_00_model_states.pt"
    path.write_bytes(content)
    meta = read_shard(str(path))
    assert meta.error


def test_truncated_pickle_inside_a_whole_zip(tmp_path):
    path = torch_zip(tmp_path / "mp_rank_00_model_states.pt", exec_payload(tmp_path / "x")[:40])
    assert read_shard(str(path)).error
    assert not (tmp_path / "x").exists()


def test_probe_and_safe_reader_import_neither_torch_nor_deepspeed(tmp_path):
    root = tmp_path / "ckpt"
    (root / TAG).mkdir(parents=True)
    (root / "latest").write_text(TAG)
    torch_zip(root / TAG / "mp_rank_00_model_states.pt", pickle.dumps({"ds_version": "0.19.8"}, protocol=2))
    code = ("import sys, io, contextlib\nfrom triage.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()):\n    main(['probe', {str(root)!r}, '--deep'])\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'deepspeed', 'numpy')))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=pc.ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    ctx = ProbeContext.for_path(str(root))
    assert checks.run(ctx, ["integrity"])["integrity"].status == "refuted"
    assert isinstance(TensorMeta((1,), "float32", "0"), TensorMeta)


FIXTURES = pc.ROOT / "tests" / "fixtures"


def test_a_real_shard_pickled_by_python_3_11_2_reads_clean():
    """Python before 3.11.5 pickles ZeroStageEnum.gradients as getattr(ZeroStageEnum, 'gradients')
    (fixture: a real DeepSpeed 0.19.8 save on Python 3.11.2, tests/fixtures/save_tiny_zero2.py)."""
    shard = FIXTURES / "py3.11.2-zero2-optim-states.pt"
    assert b"getattr" in zipfile.ZipFile(shard).read("zero_pp_rank_0_mp_rank_00_optim_states/data.pkl")
    meta = read_shard(str(shard))
    assert meta.error is None and meta.suspicious == []
    assert meta.zero_stage == 2 and meta.ds_version


def test_getattr_outside_an_enum_member_is_suspicious(tmp_path):
    pickled = (b"(dp0\nVds_version\np1\nV0.19.8\np2\nsVzero_stage\np3\nc__builtin__\ngetattr\np4\n"
               b"(cposix\nsystem\np5\nV__call__\np6\ntp7\nRp8\ns.")
    control = pickle.loads(pickled)  # the ordinary unpickler builds the bound method os.system.__call__
    assert callable(control["zero_stage"])
    meta = read_shard(str(torch_zip(tmp_path / "zero_pp_rank_0_mp_rank_00_optim_states.pt", pickled)))
    assert meta.error is None and "posix.system" in meta.suspicious
    assert any(s.startswith("builtins.getattr(") for s in meta.suspicious)
