"""Smoke test: one real corpus scenario end to end (real DeepSpeed on CPU, ~30 s warm)."""
import os
import subprocess
import sys
from pathlib import Path

import yaml

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

    entries = yaml.safe_load((out / "manifest.yaml").read_text())
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
