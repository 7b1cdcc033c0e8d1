"""Every probe against real checkpoints saved by real DeepSpeed with the corpus faults injected:
each fault confirmed by the right probe and refuted by the others; probing changes nothing."""

import json
import os
import subprocess
import sys

import pytest

from tests import probe_checkpoints as pc
from triage.probe import checks
from triage.probe.context import ProbeContext
from triage.probe.result import CONFIRMED, INCONCLUSIVE, REFUTED
from triage.probe.safe_pickle import read_shard
from triage.probe.target import from_args

pytestmark = pytest.mark.slow

# scenario -> (the probe that must confirm it, the signals it must report). Everything else: refuted
# (model and optimizer: inconclusive, nothing to compare with; tests/test_probe_model_optimizer.py).
UNCOMPARED = ("model", "optimizer")
FAULTS = {
    pc.HEALTHY: (None, []),
    pc.ZERO3: (None, []),  # healthy ZeRO-3 checkpoint; the fault is in the loading config (see below)
    "zero2-dp2-optim-shard-deleted": ("completeness", ["optim_missing"]),
    "zero2-dp2-model-states-deleted": ("completeness", ["model_missing"]),
    "zero2-dp2-optim-shard-truncated": ("integrity", ["truncated"]),
    "zero2-dp2-optim-shard-zeroed": ("integrity", ["zeroed"]),
    "zero2-dp2-optim-shard-random": ("integrity", ["garbage"]),
    "zero3-dp2-latest-deleted": ("latest", ["latest_missing"]),
}


def saved_config(root, tmp_path):
    """The ds_config the checkpoint was saved with, written as the user's --config."""
    shard = next(p for p in sorted((root / "global_step3").glob("*.pt")) if read_shard(str(p)).ds_config)
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps(read_shard(str(shard)).ds_config))
    return path


def run_probes(root, **target):
    ctx = ProbeContext.for_path(str(root), from_args(target.get("stage"), target.get("world_size"),
                                                      target.get("config")))
    return checks.run(ctx)


@pytest.mark.parametrize("case_id", list(FAULTS))
def test_fault_confirmed_by_its_probe_and_refuted_by_the_others(case_id, tmp_path):
    root = pc.scenario(case_id)
    results = run_probes(root, config=str(saved_config(root, tmp_path)))
    probe, signals = FAULTS[case_id]
    for name, result in results.items():
        if name == probe:
            assert result.status == CONFIRMED, (name, result)
            assert set(signals) <= set(result.signals), (name, result.signals)
            assert result.command and result.evidence
        elif name in UNCOMPARED:
            assert result.status == INCONCLUSIVE, (case_id, name, result.summary, result.evidence)
        else:
            assert result.status == REFUTED, (case_id, name, result.summary, result.evidence)


def test_stage_mismatch_is_confirmed_by_completeness_and_config(tmp_path):
    root = pc.scenario(pc.ZERO3)
    config = tmp_path / "stage2.json"
    config.write_text(json.dumps({"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2}}))
    by_flag = run_probes(root, stage=2)
    assert by_flag["completeness"].signals == ["stage_differs"]
    assert "mp_rank_*_model_states.pt" in " ".join(by_flag["completeness"].evidence)
    by_config = run_probes(root, config=str(config))
    assert by_config["config"].signals == ["stage_differs"]
    assert by_config["completeness"].signals == ["stage_differs"]  # --config's stage is the target stage too
    # ZeRO-1 and ZeRO-2 load into each other: not a mismatch
    assert run_probes(pc.scenario(pc.HEALTHY), stage=1)["completeness"].status == REFUTED


def test_world_size_change_of_a_zero2_checkpoint():
    results = run_probes(pc.scenario(pc.HEALTHY), world_size=1)
    assert results["completeness"].signals == ["world_size_differs"]
    assert run_probes(pc.scenario(pc.HEALTHY), world_size=2)["completeness"].status == REFUTED


def test_precision_and_batch_changes_in_the_config(tmp_path):
    root = pc.scenario(pc.HEALTHY)
    saved = json.loads(saved_config(root, tmp_path).read_text())
    bf16 = dict(saved, bf16={"enabled": True})
    (tmp_path / "bf16.json").write_text(json.dumps(bf16))
    result = run_probes(root, config=str(tmp_path / "bf16.json"))["config"]
    assert result.signals == ["precision_differs"]
    batch = dict(saved, train_micro_batch_size_per_gpu=8, gradient_accumulation_steps=4)
    (tmp_path / "batch.json").write_text(json.dumps(batch))
    result = run_probes(root, config=str(tmp_path / "batch.json"))["config"]
    assert result.status == REFUTED  # loads fine; listed as evidence
    assert any("gradient_accumulation_steps" in e and "loads" in e for e in result.evidence)


def test_config_is_inconclusive_without_a_config():
    assert run_probes(pc.scenario(pc.HEALTHY))["config"].status == INCONCLUSIVE


def test_deep_crc_check_finds_a_flipped_byte_the_structure_check_cannot():
    root = pc.copy_of(pc.HEALTHY, "flipped")
    shard = root / "global_step3" / "zero_pp_rank_0_mp_rank_00_optim_states.pt"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside a tensor record: the zip directory stays whole
    shard.write_bytes(bytes(data))
    assert run_probes(root)["integrity"].status == REFUTED
    ctx = ProbeContext.for_path(str(root), deep=True)
    deep = checks.run(ctx, ["integrity"])["integrity"]
    assert deep.signals == ["crc_mismatch"], deep.evidence


def test_layout_is_read_from_names_and_metadata():
    for case_id, expected in ((pc.HEALTHY, (2, 2, 1, False)), (pc.ZERO3, (3, 2, 1, False))):
        layout = ProbeContext.for_path(str(pc.scenario(case_id))).layout()
        assert (layout.stage, layout.dp, layout.mp, layout.bf16) == expected
        assert layout.names.stage_family == ("1/2" if expected[0] == 2 else "3")


def test_probing_never_changes_the_checkpoint(rule_cache):
    """Every file's checksum, mtime and mode, and every dir's mtime, before and after the CLI
    probe (--deep: every byte read) and triage."""
    roots = [pc.scenario(c) for c in FAULTS]
    before = {str(r): pc.snapshot(r) for r in roots}
    env_py = [sys.executable, "-m", "triage"]
    env = dict(os.environ, XDG_CACHE_HOME=rule_cache)
    log = str(pc.ROOT / "corpus/cases/zero3-saved-stage2-load-dp2.log")
    for root in roots:
        for argv in (["probe", str(root), "--deep", "--json"], ["triage", "--log", log, "--ckpt", str(root), "--deep"]):
            proc = subprocess.run(env_py + argv, cwd=pc.ROOT, capture_output=True, timeout=60, env=env)
            assert proc.returncode in (0, 1) and proc.stdout and not proc.stderr, (argv, proc.stderr[-500:])
    after = {str(r): pc.snapshot(r) for r in roots}
    assert before == after
