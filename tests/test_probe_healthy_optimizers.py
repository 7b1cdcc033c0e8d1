"""Healthy real saves of every optimizer DeepSpeed checkpoints are never flagged (issue 44, item 2).

tests/healthy_optimizers_worker.py saves each config x ZeRO stage 1, 2, 3 (DeepSpeed's Adam and
AdamW from the ds_config, fused and CPU-offloaded, torch's through `torch_adam`; torch Adam,
AdamW, SGD with momentum as client optimizers; several param groups; frozen parameters; the
elastic ZeRO-1/2 layout with its per-group step) on 2 ranks, all in ONE torchrun launch, once
per machine and fingerprint (like tests/probe_checkpoints.py's baselines, under a lock). Each must
pass `probe --deep` with no CONFIRMED probe and no consistency finding, and `verify --deep`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import time
from functools import lru_cache
from pathlib import Path

import pytest

from tests import healthy_optimizers_worker as worker
from tests.probe_checkpoints import ROOT, WORK, _traversable, fingerprint

pytestmark = pytest.mark.slow

WORKER = Path(worker.__file__)


@lru_cache(maxsize=None)
def saves() -> Path:
    """The dir holding every save of worker.names(), made (or reused) under a lock."""
    from corpus import generate, runner

    _traversable(WORK)
    stamp = hashlib.sha256(WORKER.read_bytes()).hexdigest()[:10]
    out = _traversable(WORK / fingerprint() / f"_healthy-optimizers-{stamp}")
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not all((out / f"{name}.json").exists() for name in worker.names()):
            runner.EXT_DIR["path"] = str(generate.EXT_CACHE)
            generate.warm_up_ops(out)
            cmd = runner.TORCHRUN + ["--nproc_per_node=2", str(WORKER), "--out", str(out)]
            start = time.time()
            code = runner.run(cmd, {}, out / "launch.log", timeout=3600)
            if code != 0:
                raise RuntimeError(f"healthy saves failed (exit {code}) after {time.time() - start:.0f} s; "
                                   f"see {out / 'launch.log'}")
    return out


def _cli(*args: str) -> subprocess.CompletedProcess:
    """The command run in this process (78 of them: an interpreter start and the imports each would
    cost about a minute of the suite), its stdout and stderr captured as a subprocess's would be."""
    import contextlib
    import io

    from triage.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return subprocess.CompletedProcess(["ds-triage", *args], code, out.getvalue(), err.getvalue())


@pytest.mark.parametrize("name", worker.names())
def test_healthy_save_passes_probe_deep(name):
    root = saves() / name
    ran = _cli("probe", "--deep", "--format", "json", str(root))
    report = json.loads(ran.stdout)
    probes = {p["name"]: p for p in report["probes"]}
    confirmed = [f"{p['name']}: {p['evidence'][:1]}" for p in report["probes"] if p["status"] == "confirmed"]
    assert not confirmed, confirmed
    assert ran.returncode == 0, ran.stderr
    consistency = probes["consistency"]
    assert consistency["signals"] == [], consistency
    # the steps were compared (an optimizer without a step counter, SGD, says so instead)
    assert "step_differs" in consistency["checked"] or any("no step counter" in line
                                                           for line in consistency["evidence"]), consistency


@pytest.mark.parametrize("name", worker.names())
def test_healthy_save_passes_verify_deep(name):
    ran = _cli("verify", "--deep", str(saves() / name))
    assert ran.returncode == 0, ran.stdout + ran.stderr


@pytest.mark.parametrize("stage", worker.STAGES)
def test_a_shard_of_another_save_is_still_caught_by_its_per_parameter_step(stage, tmp_path):
    """FusedAdam keeps a per-group step (0) beside the per-parameter one: rank 1's shard from the same
    run one step earlier differs in the per-parameter step (3 vs 2), and is caught."""
    root = tmp_path / "mixed"
    shutil.copytree(saves() / f"ds-adam-z{stage}", root)
    other = saves() / f"ds-adam-2steps-z{stage}" / "global_step2"
    shard = "zero_pp_rank_1_mp_rank_00_optim_states.pt"
    shutil.copyfile(other / shard, root / "global_step3" / shard)
    report = json.loads(_cli("probe", "--deep", "--format", "json", str(root)).stdout)
    consistency = next(p for p in report["probes"] if p["name"] == "consistency")
    assert consistency["status"] == "confirmed" and "step_differs" in consistency["signals"], consistency
    line = next(e for e in consistency["evidence"] if "different per-parameter steps" in e)
    assert f"{shard} (step 2)" in line and "step 3 in most" in line, line
    assert not any("per-param-group" in e for e in consistency["evidence"])  # those agree: 0 in each
    assert _cli("verify", "--deep", str(root)).returncode == 1
