"""The consistency probe (--deep): shards DeepSpeed loads without a word, on real checkpoints.

The faulted checkpoints are corpus/silent.py's: real baselines with two ranks' optimizer shards
exchanged, or one rank's shard copied in from a later real save of the same run. Every healthy
baseline of tests/probe_checkpoints.LAYOUTS (fp32 and bf16, ZeRO-0 to 3) must come out clean.
"""

import json
import shutil
import struct
import subprocess
import zipfile

import pytest

from corpus import silent as table
from tests import probe_checkpoints as pc
from tests.test_probe_cli import _validator, errors
from triage.probe import checks, deep_scan
from triage.probe.context import ProbeContext
from triage.probe.flat_layout import zero12_group
from triage.probe.tensor_data import Archive
from triage.probe.tolerance import Tally

TAG = "global_step3"
SILENT = {entry["id"]: entry for entry in table.SILENT}


def deep(root):
    ctx = ProbeContext.for_path(str(root), deep=True)
    return ctx, checks.run(ctx, checks.ORDER)


# ---------------------------------------------------------------- the layout and the arithmetic

def test_padding_falls_on_the_last_ranks_as_deepspeed_records_it():
    # 10 elements, dp 4: aligned to 2 x 4 = 8 -> 16, partitions of 4; rank 2 holds 8..11 (2 real), rank 3 none
    layout = zero12_group({"a": (6,), "b": (4,)}, 4, [0, 0])
    assert (layout.total, layout.partition_size) == (16, 4)
    assert [layout.padding(r) for r in range(4)] == [0, 0, 2, 4]
    assert [layout.saved_numel(r) for r in range(4)] == [4, 4, 2, 0]
    assert layout.slice_mappings(1) == [("a", 2, 0), ("b", 2, 2)]
    assert layout.slice_mappings(2) == [("b", 2, 0)]
    padded = zero12_group({"a": (3,), "b": (4,)}, 2, [1, 0])  # a's alignment padding puts b at 4: rank 1's
    assert [(p.param.name, p.param_offset, p.at, p.count) for p in padded.pieces(0)] == [("a", 0, 0, 3)]
    assert [(p.param.name, p.param_offset, p.at, p.count) for p in padded.pieces(1)] == [("b", 0, 0, 4)]


def test_tolerance_is_the_weights_rounding():
    np = pytest.importorskip("numpy")
    master = np.array([1.0, -3.14159265, 1e-3, 65504.0, 0.0], dtype="<f4")
    bf16 = (master.view("<u4") + 0x7FFF + ((master.view("<u4") >> 16) & 1)) >> 16  # round to nearest even
    tally = Tally()
    tally.add(master.tobytes(), "float32", bf16.astype("<u2").tobytes(), "bfloat16")
    assert (tally.differ, tally.compared) == (0, 5)
    two_ulps = bf16.astype("<u2") + np.array([2, 0, 0, 0, 0], dtype="<u2")
    tally.add(master.tobytes(), "float32", two_ulps.tobytes(), "bfloat16")
    assert (tally.differ, tally.first, tally.compared) == (1, 5, 10)
    half = Tally()  # fp16: numpy's own rounding; over 65504 it is an infinity of the same sign
    big = np.array([1.0, -2.5e-8, 70000.0, 3.3333333], dtype="<f4")
    with np.errstate(over="ignore"):
        rounded, off = big.astype("<f2"), (big * np.float32(1.002)).astype("<f2")
    half.add(big.tobytes(), "float32", rounded.tobytes(), "float16")
    assert half.differ == 0
    half.add(big.tobytes(), "float32", off.tobytes(), "float16")
    assert half.differ == 2  # 1.002 and 3.34 are two fp16 units off; -2.5e-8 rounds to the same subnormal, inf stays
    exact = Tally()
    exact.add(master.tobytes(), "float32", np.nextafter(master, np.float32(np.inf)).tobytes(), "float32")
    assert exact.differ == 5  # fp32 against fp32 is bit-exact: one ulp is a difference


def test_shards_renamed_in_a_cycle_get_the_renames_that_put_each_back(tmp_path):
    from triage.probe.checks import consistency

    tag = tmp_path / TAG
    tag.mkdir()
    (tmp_path / "latest").write_text(TAG)
    names = [f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt" for r in range(3)]
    holds = {0: 1, 1: 2, 2: 0}  # the file named for rank r holds rank holds[r]'s partition
    for r, name in enumerate(names):
        (tag / name).write_text(f"partition of rank {holds[r]}")
    scan = deep_scan.Scan(master_dtype="float32", weights_dtype="float32")
    for r, name in enumerate(names):
        tally = Tally(compared=10, differ=10, first=0)
        scan.ranks.append(deep_scan.RankFacts(name, 0, r, tally=tally, holds=holds[r], steps=[3]))
    found = consistency._Found(ProbeContext.for_path(str(tmp_path)), scan)
    found.owners()
    assert found.signals == ["shard_swapped"] and len(found.evidence) == 1, found.evidence
    assert "renamed in a cycle" in found.evidence[0]
    subprocess.run(["sh", "-c", found.evidence[0].split("rename them back: ", 1)[1]], check=True)
    assert [(tag / name).read_text() for name in names] == [f"partition of rank {r}" for r in range(3)]


# ---------------------------------------------------------------- reading tensor data

@pytest.mark.slow
def test_tensor_bytes_are_torchs_own():
    torch = pytest.importorskip("torch")
    path = pc.baselines() / "z2-dp2-bf16" / TAG / "mp_rank_00_model_states.pt"
    oracle = torch.load(path, map_location="cpu", weights_only=True)["module"]  # our own trusted baseline
    ctx = ProbeContext.for_path(str(path.parent.parent))
    module = ctx.meta(path.name).graph["module"]
    with Archive(str(path)) as archive:
        for name, tensor in module.items():
            span = archive.span(tensor)
            data = archive.read(span.record, span.start, span.nbytes)
            assert data == oracle[name].contiguous().view(torch.int16).numpy().tobytes(), name
        assert archive.finish() is None


@pytest.mark.slow
def test_one_pass_reads_every_byte_once_and_checks_every_crc():
    root = pc.baselines() / "z2-dp2-fp32"
    ctx, results = deep(root)
    scan = deep_scan.scan(ctx)
    held = 0
    for shard in ctx.listing.shards:
        with zipfile.ZipFile(ctx.shard_path(shard.name)) as zf:
            held += sum(i.file_size for i in zf.infolist())
    assert scan.bytes_read == held  # each record's bytes exactly once: tensor data and CRC together
    assert set(scan.crc) == {s.name for s in ctx.listing.shards} and not any(scan.crc.values())
    assert results["integrity"].status == "refuted" and results["consistency"].status == "refuted"


@pytest.mark.slow
def test_a_flipped_bit_in_a_master_partition_is_damage_not_another_save():
    root = pc.copy_of(pc.HEALTHY, "partition-bit")
    shard = root / TAG / "zero_pp_rank_1_mp_rank_00_optim_states.pt"
    ctx = ProbeContext.for_path(str(root))
    part = ctx.meta(shard.name).graph["optimizer_state_dict"]["single_partition_of_fp32_groups"][0]
    with zipfile.ZipFile(shard) as zf:
        info = zf.getinfo(f"zero_pp_rank_1_mp_rank_00_optim_states/data/{part.storage_key}")
    with open(shard, "r+b") as f:
        f.seek(info.header_offset)
        name_len, extra_len = struct.unpack("<HH", f.read(30)[26:30])
        at = info.header_offset + 30 + name_len + extra_len + 4 * 1000 + 3  # element 1000's top byte
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ 0x40]))
    _, results = deep(root)
    assert results["integrity"].signals == ["crc_mismatch"]
    consistency = results["consistency"]
    assert consistency.signals == ["master_differs"], consistency.evidence
    assert "1 of 33,540 values of its fp32 master partition differ" in consistency.evidence[0] and "damaged" in consistency.evidence[0]


# ---------------------------------------------------------------- healthy checkpoints

@pytest.mark.slow
@pytest.mark.parametrize("layout", pc.LAYOUTS)
def test_no_healthy_baseline_is_flagged(layout, cli):
    root = pc.baselines() / layout
    ctx, results = deep(root)
    consistency = results["consistency"]
    assert not consistency.signals, consistency.evidence
    stage = ctx.layout().stage
    assert consistency.status == ("refuted" if stage in (1, 2) else "inconclusive"), consistency.evidence
    if stage in (1, 2):
        bf16 = ctx.layout().bf16
        assert consistency.facts["weights_dtype"] == ("bfloat16" if bf16 else "float32")
        said = "within one bfloat16 unit in the last place" if bf16 else "bit-exact"
        assert any(said in e for e in consistency.evidence), consistency.evidence
    problems = json.loads(cli("verify", root, "--deep", "--json").stdout)["problems"]
    assert not [p for p in problems if p.startswith(("consistency: ", "integrity: "))], problems


# ---------------------------------------------------------------- the silent faults

@pytest.mark.slow
@pytest.mark.parametrize("case_id", sorted(SILENT))
def test_each_silent_fault_is_found_and_fails_verify(case_id, cli):
    root = pc.silent(case_id)
    expect = SILENT[case_id]["expect"]
    shallow = cli("probe", root, "--json")
    assert shallow.returncode == 0, "found without --deep: not a silent fault of the checkpoint"
    proc = cli("probe", root, "--deep", "--json")
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert errors(_validator("probe.schema.json"), report) == []
    consistency = next(p for p in report["probes"] if p["name"] == "consistency")
    assert sorted(f"consistency.{s}" for s in consistency["signals"]) == sorted(expect), consistency["evidence"]
    assert report["findings"] == ["corrupt_file"]
    assert "Fix:" in " ".join(consistency["evidence"]) or case_id.startswith("z3"), consistency["evidence"]
    verified = cli("verify", root, "--deep", "--json")
    data = json.loads(verified.stdout)
    assert errors(_validator("verify.schema.json"), data) == []
    assert verified.returncode == 1 and any(p.startswith("consistency: ") for p in data["problems"])


@pytest.mark.slow
@pytest.mark.parametrize("case_id", sorted(c for c in SILENT if c.endswith("swapped")))
def test_the_swap_fix_printed_restores_a_clean_checkpoint(case_id, tmp_path):
    root = tmp_path / "ckpt"
    shutil.copytree(pc.silent(case_id), root)
    _, results = deep(root)
    evidence = results["consistency"].evidence[0]
    assert "holds rank 1's fp32 master partition" in evidence and "rank 0's" in evidence, evidence
    fix = evidence.split("swap them back: ", 1)[1]
    subprocess.run(["sh", "-c", fix], check=True)
    _, after = deep(root)
    assert after["consistency"].status == "refuted", after["consistency"].evidence


@pytest.mark.slow
def test_a_shard_from_a_later_save_names_its_step_and_the_tag_that_agrees():
    _, results = deep(pc.silent("z2-dp2-fp32-optim-shard-from-later-save"))
    text = " ".join(results["consistency"].evidence)
    assert "zero_pp_rank_1_mp_rank_00_optim_states.pt" in text and "step 5" in text, text
    assert "global_steps 3" in text and "match no rank's slice" in text, text
    assert "resume from global_step5" in text, text


# a real resume from swapped shards, which DeepSpeed takes without a word: in the gate
# (test_eval_checkpoints.py::test_eval_with_checkpoints_meets_the_gate), which makes it anyway


def test_without_deep_the_probe_does_not_run(tmp_path):
    ctx = ProbeContext.for_path(str(tmp_path))
    assert "consistency" not in checks.run(ctx, checks.ORDER)
    result = checks.run(ctx, ["consistency"])["consistency"]
    assert result.status == "inconclusive" and "--deep" in result.summary

