"""Confinement (issue 16): no command follows a checkpoint out of its root, opens a FIFO or a
device, or writes through a planted symlink. Real DeepSpeed checkpoints (copies of the cached
baselines) with the attacks of tests/hostile/paths.py planted, run through the real CLI."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import probe_checkpoints as pc
from tests.hostile import paths as hp

REPO = Path(__file__).resolve().parents[1]
LAYOUT = "z2-dp1-fp32"
TIMEOUT = 120  # generous on a busy 2-core machine: a FIFO would block forever


def path_probe(proc: subprocess.CompletedProcess) -> dict:
    return next(p for p in json.loads(proc.stdout)["probes"] if p["name"] == "path")


def run(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "triage", *map(str, args)], capture_output=True, text=True,
                          timeout=TIMEOUT, env=env, cwd=REPO)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 70 and "Traceback" not in out, out[-2000:]
    assert hp.MARKER not in out, f"{args}: printed the outside secret"
    return proc


@pytest.fixture
def planted(tmp_path_factory) -> hp.Planted:
    base = Path(tmp_path_factory.mktemp("hostile-paths"))
    return hp.prepare(pc.baselines() / LAYOUT, base)


def commands(p: hp.Planted) -> list[tuple[str, ...]]:
    log = pc.baselines() / f"{LAYOUT}.log"
    return [("probe", p.root), ("triage", "--log", log, "--ckpt", p.root), ("verify", p.root),
            ("manifest", p.root), ("repair", "latest", p.root, "--dry-run"), ("repair", "latest", p.root, "--apply")]


CASES = {  # builder -> what the path probe reports
    "latest_to_secret": "latest: leads outside the checkpoint root",
    "latest_hardlink_to_secret": "latest: a hard link (2 names, 1 of them inside the checkpoint), possibly to a file",
    "latest_hardlink_to_token": "latest: a hard link (2 names, 1 of them inside the checkpoint), possibly to a file",
    "latest_dotdot": "which leads outside the checkpoint root: not followed",
    "tag_symlink_out": "a tag dir that leads outside the checkpoint root",
    "shard_to_secret": "model_states.pt': leads outside the checkpoint root",
    "shard_fifo": "a FIFO, not a regular file: not read",
    "latest_fifo": "latest: a FIFO, not a regular file: not read",
    "shard_dev_zero": "model_states.pt': leads outside the checkpoint root",
}


@pytest.mark.parametrize("builder", sorted(CASES))
def test_every_command_stays_inside(planted, builder):
    getattr(hp, builder)(planted)
    outside = pc.snapshot(planted.outside)
    probe = run("probe", planted.root, "--json")
    path = path_probe(probe)
    assert path["status"] == "confirmed" and "unsafe_path" in path["signals"], path
    assert any(CASES[builder] in line for line in path["evidence"]), path["evidence"]
    for args in commands(planted)[1:]:
        run(*args)
    assert pc.snapshot(planted.outside) == outside  # nothing outside read into output, nothing written there
    assert not (planted.outside / planted.tag / "ds-triage-manifest.json").exists()


def test_manifest_entry_outside_is_not_hashed(planted):
    assert run("manifest", planted.root).returncode == 0
    manifest = json.loads((planted.tag_dir / "ds-triage-manifest.json").read_text())
    (planted.tag_dir / "ds-triage-manifest.json").unlink()
    hp.manifest_dotdot(planted, manifest)
    secret_sha = hashlib.sha256(planted.secret.read_bytes()).hexdigest()
    proc = run("verify", planted.root)
    assert proc.returncode == 1
    assert "leads outside the tag dir" in proc.stdout
    assert secret_sha[:8] not in proc.stdout + proc.stderr


def test_writes_never_follow_planted_symlinks(planted, monkeypatch, capsys):
    """The old temporary and backup names, planted as symlinks to a victim outside: `manifest`
    refuses a tag holding a symlink out, the manifest writer and `repair latest --apply` (in this
    process, so its pid is the one planted) leave the victim alone."""
    from triage.cli import main
    from triage.manifest.build import write

    (planted.root / "global_step1").symlink_to(planted.tag)  # an older tag name, inside the root
    (planted.root / "latest").write_text("global_step_gone")  # dangling: repair latest has work to do
    hp.temporaries_to_victim(planted, [os.getpid()])
    victim = planted.outside / "victim.txt"
    outside = pc.snapshot(planted.outside)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    assert main(["manifest", str(planted.root), "--tag", planted.tag]) == 3
    assert "ds-triage-manifest.json.tmp-" in capsys.readouterr().err  # the planted link, refused by name
    write(str(planted.tag_dir), {"kind": "ds-triage-manifest", "files": []})
    assert main(["repair", "latest", str(planted.root), "--apply", "--json"]) in (0, 1)
    capsys.readouterr()
    assert victim.read_text() == "untouched\n"
    assert pc.snapshot(planted.outside) == outside
    assert (planted.root / "latest").read_text() in (planted.tag, "global_step1")
    assert (planted.tag_dir / "ds-triage-manifest.json").is_file()
    backups = [b for b in planted.root.glob("latest.bak-*") if not b.is_symlink()]
    assert len(backups) == 1 and backups[0].read_text() == "global_step_gone"


@pytest.mark.parametrize("action", ["fp32", "universal", "strip-optimizer"])
def test_repairs_refuse_a_tag_with_a_planted_fifo(planted, action):
    """A FIFO named so DeepSpeed's own glob (`*_optim_states.pt`) would open it: refused before any tool runs."""
    os.mkfifo(planted.tag_dir / "extra_optim_states.pt")
    proc = run("repair", action, planted.root, "--apply")
    assert proc.returncode == 1 and "'extra_optim_states.pt': a FIFO, not a regular file" in proc.stderr, proc.stderr


def test_backup_of_a_symlinked_latest_copies_the_link_not_the_secret(tmp_path):
    from triage.repair import files

    secret = tmp_path / "secret.txt"
    secret.write_text(hp.MARKER)
    latest = tmp_path / "latest"
    latest.symlink_to(secret)
    files.backup(str(latest), str(tmp_path / "latest.bak"))
    assert (tmp_path / "latest.bak").is_symlink() and os.readlink(tmp_path / "latest.bak") == str(secret)


def test_a_tag_symlink_inside_the_root_is_allowed(planted):
    alias = hp.inside_alias(planted)
    probe = run("probe", planted.root, "--json")
    path = path_probe(probe)
    assert path["status"] == "refuted" and "unsafe_path" in path["checked"], path
    assert any(f"probing tag {alias}" in line for line in path["evidence"]), path["evidence"]
    assert run("verify", planted.root).returncode == 0
