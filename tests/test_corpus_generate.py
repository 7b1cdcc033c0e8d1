"""Smoke test: one real corpus scenario end to end (real DeepSpeed on CPU, ~30 s warm)."""
import json
import os
import subprocess
import sys
from pathlib import Path

from triage.kb.source import load_yaml

REPO = Path(__file__).resolve().parent.parent
SCENARIO = "zero2-dp1-latest-deleted"


def test_generate_one_scenario(tmp_path):
    keep, out = tmp_path / "keep", tmp_path / "out"
    env = dict(os.environ, PATH=f"{REPO / '.venv' / 'bin'}:{os.environ.get('PATH', '')}")
    proc = subprocess.run([sys.executable, "-m", "corpus.generate", "--only", SCENARIO,
                           "--keep", str(keep), "--out", str(out), "--progress"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # running counts (--progress: the meter, piped as it is here)
    assert "[1/1, " in proc.stderr and f"] {SCENARIO}" in proc.stderr
    assert "corpus: scenarios: 100%" in proc.stderr and "1/1" in proc.stderr and "1 generated, 0 not" in proc.stderr

    log = out / "cases" / f"{SCENARIO}.log"
    text = log.read_text()
    assert text.strip()
    # the real DeepSpeed warning for a missing `latest`, and the worker seeing (None, None)
    assert "[WARNING] [engine.py:" in text and "Unable to find latest file at" in text
    assert "load_checkpoint returned load_path=None client_state keys=None" in text

    entries = load_yaml((out / "manifest.yaml").read_text())
    entry = next(e for e in entries if e["id"] == SCENARIO)
    assert entry["log"] == f"cases/{SCENARIO}.log"
    assert entry["kind"] == "silent"
    assert entry["expected_category"] == "missing_file"
    assert entry["layout"] == {"stage": 2, "dp": 1, "precision": "fp32"}
    assert entry["exit_code"] == 0
    assert "torch.distributed.run --nproc_per_node=1 corpus/workers/load.py" in entry["command"]
    assert "Unable to find latest file" in entry["what_happened"]
    for key in ("scenario", "fault", "deepspeed", "torch"):
        assert entry[key]

    # --keep: the faulted checkpoint and the cached baseline stay on disk
    assert (keep / SCENARIO / "global_step3" / "mp_rank_00_model_states.pt").is_file()
    assert not (keep / SCENARIO / "latest").exists()
    assert (keep / "_base" / "z2-dp1-fp32" / "latest").is_file()


def _same(a, b, where: str) -> list[str]:
    """Where two unpickled checkpoint objects differ: tensors bit for bit, the rest by value."""
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        same = (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype
                and a.shape == b.shape and torch.equal(a, b))
        return [] if same else [where]
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{where}: keys {sorted(map(str, a.keys() ^ b.keys()))}"]
        return [d for k in a for d in _same(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [f"{where}: length {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _same(x, y, f"{where}[{i}]")]
    if hasattr(a, "__dict__") and type(a) is type(b):
        return _same(vars(a), vars(b), where)
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


def checkpoint_differences(left: Path, right: Path) -> list[str]:
    """Files and values of two saves of one layout that differ (our own trusted saves: torch.load)."""
    import torch

    names = sorted(str(p.relative_to(left)) for p in left.rglob("*") if p.is_file())
    other = sorted(str(p.relative_to(right)) for p in right.rglob("*") if p.is_file())
    if names != other:
        return [f"files: {sorted(set(names) ^ set(other))}"]
    out = []
    for name in names:
        if name.endswith(".pt"):
            out += _same(torch.load(left / name, map_location="cpu", weights_only=False),
                         torch.load(right / name, map_location="cpu", weights_only=False), name)
        elif (left / name).read_bytes() != (right / name).read_bytes():
            out.append(name)
    return out


def test_layouts_trained_in_one_launch_save_what_one_launch_each_saves(tmp_path):
    # the probe tests' baselines come from build_bases (one launch per world size); the last layout of
    # the two-rank launch (ZeRO-3 bf16, after five other engines in the same process) and a one-rank
    # one, against the same layouts trained alone
    from corpus import generate, runner
    from tests import probe_checkpoints as pc

    batched = pc.baselines()
    assert (generate.batchable({"stage": 3, "dp": 2, "precision": "bf16"})
            and not generate.batchable({"stage": 1, "tp": 2, "precision": "fp32"}))
    runner.EXT_DIR["path"] = str(generate.EXT_CACHE)
    for name in ("z3-dp2-bf16", "z2-dp1-fp32"):
        assert json.loads((batched / f"{name}.json").read_text())["batched"] is True
        generate.build_base(name, tmp_path, False)
        assert checkpoint_differences(batched / name, tmp_path / name) == []
    # and the comparison sees a difference: another layout's save
    assert checkpoint_differences(batched / "z3-dp2-bf16", batched / "z3-dp2-fp32")


def test_a_failed_run_says_how_its_log_ends(tmp_path):
    """A run that fails in a test names its cause in the failure itself: the session directory
    holding its log is removed before CI prints the report."""
    from corpus import runner

    log = tmp_path / "run.log"
    log.write_text("".join(f"line {n}\n" for n in range(40)) + "\nRuntimeError: the real cause\n\n")
    message = runner.failure("torchrun train.py", 1, log)
    assert message.startswith("torchrun train.py exited 1;") and message.endswith("RuntimeError: the real cause")
    assert "line 39" in message and "line 10\n" not in message  # the end, not the whole log
    assert "could not be read" in runner.failure("x", 1, tmp_path / "missing.log")
