"""A real Python environment without torch and DeepSpeed, for the commands that need them.

A venv (`python -m venv --without-pip`) whose one .pth adds a directory of symlinks to every entry
of this venv's site-packages except torch's and DeepSpeed's (their packages and dist-info): ds-triage
and its core dependencies import as they do here, `import torch` fails as it does where torch was
never installed ("No module named 'torch'"), and importlib.metadata finds neither release. Nothing is
copied or installed; made once per test session.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEFT_OUT = re.compile(r"^(torch|torchgen|functorch|deepspeed)([-_.+].*)?$", re.IGNORECASE)


def make(where: Path) -> str:
    """The python of an environment like this one minus torch and DeepSpeed, made under `where`."""
    venv, kept = where / "venv", where / "site-packages"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    kept.mkdir()
    ours = Path(sysconfig.get_paths()["purelib"])
    for entry in ours.iterdir():
        if not LEFT_OUT.match(entry.name):
            os.symlink(entry, kept / entry.name)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "ds_triage_without_torch.pth").write_text(f"import site; site.addsitedir({str(kept)!r})\n")
    return str(python)


def run(python: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m triage ARGS` from the checkout, without PYTHONPATH leaking this environment in."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([python, "-m", "triage", *args], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=timeout)
