#!/usr/bin/env python3
"""Set up a virtualenv and run ds-triage's demo or test suite.

    python3 dev.py demo    # core install, then classify a bundled real log
    python3 dev.py test    # full install (torch CPU, DeepSpeed, pyspark), then pytest

Needs only python3. Installs into ./.venv and skips steps already done for
the current pyproject.toml.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / "bin"
PY = BIN / "python"
DEMO_LOG = ROOT / "corpus" / "cases" / "job-zero3-train-then-stage2-load.log"
TORCH = "torch==2.13.0"  # the CPU build; an unpinned torch pulls a multi-GB CUDA build
DEEPSPEED = "deepspeed==0.19.8"


def sh(*cmd: str, **kw) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env=env(), **kw)


def env() -> dict:
    # The venv's bin first: its ninja differs from the system's, and a mix
    # makes torch rebuild DeepSpeed's ops.
    e = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", DS_ACCELERATOR="cpu")
    e.pop("PYTHONPATH", None)
    return e


def stamp(kind: str) -> Path:
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + kind.encode() + DEEPSPEED.encode()).hexdigest()[:12]
    return VENV / f".setup-{kind}-{digest}"


def setup(kind: str) -> None:
    if not PY.exists():
        sh(sys.executable, "-m", "venv", str(VENV))
        sh(str(PY), "-m", "pip", "install", "-q", "--upgrade", "pip")
    if stamp(kind).exists():
        return
    # batch: pyspark, so that tests/test_batch.py runs Spark (local mode) in CI rather than skipping
    sh(str(PY), "-m", "pip", "install", "-q", "-e", f"{ROOT}[{'test,batch' if kind == 'full' else 'test'}]")
    if kind == "full":
        sh(str(PY), "-m", "pip", "install", "-q", TORCH)
        sh(str(PY), "-m", "pip", "install", "-q", "--no-build-isolation", DEEPSPEED)
    stamp(kind).touch()


def main(argv: list[str]) -> int:
    what = argv[0] if argv else ""
    if what == "demo":
        setup("core")
        return subprocess.run([str(BIN / "ds-triage"), "classify", str(DEMO_LOG), *argv[1:]], env=env()).returncode
    if what == "test":
        setup("full")
        # One worker per core; a worker that runs out of tests steals from the other, so none
        # idles while the other waits on a lock for baselines or runs a long file alone
        # (loadfile: 664 s on 2 cores, worksteal: 574 s); `-n 0` after `test` runs it here.
        parallel = ["-n", "auto", "--dist", "worksteal"]
        code = subprocess.run([str(PY), "-m", "pytest", "-q", *parallel, *argv[1:]], cwd=ROOT, env=env()).returncode
        return 1 if code == 5 else code  # 5: no tests collected is a failure, not a pass
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
