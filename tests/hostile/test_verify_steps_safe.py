"""Verify steps run nothing the checkpoint controls (issue 40, finding 5).

DS-X004 used to print `git -C CKPT lfs ls-files`: in a checkpoint that is a git repository, git
obeys the repository's own `.git/config` (an alias `lfs`, `core.fsmonitor`, hooks), so pasting the
step ran whatever the checkpoint's author planted. Here a real checkpoint (a DeepSpeed baseline
whose optimizer shard is replaced by the Git LFS pointer git-lfs writes for it) is made a real git
repository with every such trap, and DS-X004's verify steps are run exactly as `classify --ckpt`
prints them; no trap fires, and the steps still show the pointer.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.probe_checkpoints import layout_base
from triage.kb.source import load_yaml
from triage.kb.verify_steps import checkpoint_tool

RULE = ROOT / "rules" / "corrupt_file" / "DS-X004-git-lfs-pointer-file.yaml"
SHARD = "zero_pp_rank_0_mp_rank_00_optim_states.pt"
HOOKS = ("pre-commit", "post-checkout", "post-index-change", "reference-transaction", "pre-auto-gc",
         "fsmonitor-watchman", "post-merge", "pre-push")


def test_no_rule_prints_a_verify_step_that_runs_the_checkpoints_tools(cli):
    steps = [(path.name, step["command"]) for path in sorted((ROOT / "rules").rglob("*.yaml"))
             for step in load_yaml(path.read_text()).get("verify", [])]
    assert len(steps) > 100
    assert [(name, command) for name, command in steps if checkpoint_tool(command)] == []
    lint = cli("rules", "lint")
    assert lint.returncode == 0, lint.stderr.decode()


def _lfs_pointer(shard: Path) -> None:
    """Replace the shard by the pointer git-lfs checks out for it (spec v1: oid and size of the data)."""
    data = shard.read_bytes()
    shard.write_text(f"version https://git-lfs.github.com/spec/v1\noid sha256:{hashlib.sha256(data).hexdigest()}\n"
                     f"size {len(data)}\n")


def _trapped_repository(ckpt: Path, marker: Path) -> None:
    """A real git repository in the checkpoint whose config and hooks touch `marker` when git runs."""
    trap = f"touch {marker}"
    git = ["git", "-C", str(ckpt)]
    subprocess.run(git + ["init", "-q"], check=True)
    settings = [("alias.lfs", f"!{trap}"), ("alias.ls-files", f"!{trap}"), ("core.fsmonitor", f"{trap}; false #"),
                ("core.pager", trap), ("filter.lfs.process", trap), ("filter.lfs.smudge", trap)]
    for key, value in settings:
        subprocess.run(git + ["config", key, value], check=True)
    for hook in HOOKS:
        path = ckpt / ".git" / "hooks" / hook
        path.write_text(f"#!/bin/sh\n{trap}\n")
        path.chmod(0o755)
    (ckpt / ".envrc").write_text(f"{trap}\n")
    (ckpt / "Makefile").write_text(f"all:\n\t{trap}\n")


def _printed_steps(ckpt: Path, tag: str, log: Path, cwd: Path) -> list[str]:
    shown = subprocess.run([sys.executable, "-m", "triage", "classify", "--ckpt", str(ckpt), "--tag", tag, str(log)],
                           cwd=cwd, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    return [line.split("] ", 1)[1] for line in shown.stdout.splitlines() if line.startswith("  [DS-X004] ")]


@pytest.mark.slow
def test_the_printed_verify_steps_run_no_planted_command(tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(layout_base("z2-dp1-fp32"), ckpt, symlinks=True)
    tag = (ckpt / "latest").read_text().strip()
    _lfs_pointer(ckpt / tag / SHARD)
    marker = tmp_path / "planted-command-ran"
    _trapped_repository(ckpt, marker)
    # The traps are live: the step DS-X004 used to print runs the planted alias.
    subprocess.run(["git", "-C", str(ckpt), "lfs", "ls-files"], cwd=tmp_path, capture_output=True)
    assert marker.exists(), "the planted git alias did not run: the test would prove nothing"
    marker.unlink()

    log = tmp_path / "x004.log"
    log.write_text(next(e["log"] for e in load_yaml(RULE.read_text())["examples"]
                        if e["expect"] == "match" and "log" in e))
    steps = _printed_steps(ckpt, tag, log, tmp_path)
    assert len(steps) == len(load_yaml(RULE.read_text())["verify"])
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    out = ""
    for step in steps:  # as an on-call engineer pastes them, from their own directory
        done = subprocess.run(["bash", "-c", step], cwd=tmp_path, env=env, capture_output=True, text=True,
                              errors="replace", timeout=120)
        out += done.stdout
    assert not marker.exists(), f"a verify step ran the checkpoint's planted command: {steps}"
    assert "version https://git-lfs.github.com/spec/v1" in out  # the steps still show the pointer
    assert f"{SHARD}: lfs_pointer" in out
