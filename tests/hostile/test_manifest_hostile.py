"""`manifest` and the manifest check of `verify` on a tag holding what is not a file (issue 40, finding 8):
a symlink loop, a socket, a FIFO, a device. Each is named and never opened; `manifest` exits 3 (the
documented "cannot be hashed"), never 70 with a traceback. Real DeepSpeed checkpoints (copies of a
cached baseline), real sockets, FIFOs and device nodes."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
from pathlib import Path

import pytest

from tests import probe_checkpoints as pc
from tests.hostile import payloads

LAYOUT = "z2-dp2-fp32"
SHARD = "zero_pp_rank_1_mp_rank_00_optim_states.pt"


@pytest.fixture
def root(tmp_path) -> Path:
    return payloads.copy_baseline(LAYOUT, tmp_path / "ckpt")


def run(capsys, *argv) -> tuple[int, str, str]:
    from triage.cli import main

    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    assert code != 70 and "Traceback" not in out.out + out.err, out.err
    return code, out.out, out.err


def loop(tag: Path) -> str:
    (tag / "loop").symlink_to("loop")
    return "'loop': a symlink loop"


def loop_of_two(tag: Path) -> str:
    (tag / "a").symlink_to("b")
    (tag / "b").symlink_to("a")
    return "'a': a symlink loop"


def socket_shard(tag: Path) -> str:
    (tag / SHARD).unlink()
    with contextlib.chdir(tag), socket.socket(socket.AF_UNIX) as sock:
        sock.bind(SHARD)  # relative: a socket's path has a 108-byte limit; the file stays after the close
    return f"'{SHARD}': a socket, not a regular file"


def fifo_shard(tag: Path) -> str:
    (tag / SHARD).unlink()
    os.mkfifo(tag / SHARD)
    return f"'{SHARD}': a FIFO, not a regular file"


def device_shard(tag: Path) -> str:
    """A character device inside the tag (a /dev/zero of its own): endless bytes."""
    (tag / SHARD).unlink()
    os.mknod(tag / SHARD, stat.S_IFCHR | 0o644, os.makedev(1, 5))
    return f"'{SHARD}': a character device, not a regular file"


PLANTS = [loop, loop_of_two, socket_shard, fifo_shard,
          pytest.param(device_shard, marks=pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root"))]


@pytest.mark.parametrize("plant", PLANTS)
def test_manifest_names_what_is_not_a_file(root, capsys, plant):
    said = plant(root / payloads.TAG)
    code, out, err = run(capsys, "manifest", root, "--force")
    assert code == 3, err
    assert said in err and "a manifest hashes only regular files inside the tag" in err, err
    assert not (root / payloads.TAG / "ds-triage-manifest.json").exists()


@pytest.mark.parametrize("plant", PLANTS)
def test_verify_against_a_manifest_names_what_is_not_a_file(root, capsys, plant):
    """A manifest written on the healthy tag, then the plant: the check names it, hashes nothing of it."""
    assert run(capsys, "manifest", root)[0] == 0
    said = plant(root / payloads.TAG)
    code, out, err = run(capsys, "verify", root, "--json")
    assert code == 1
    problems = json.loads(out)["manifest"]["problems"]
    name, why = said.split(": ", 1)
    if plant in (loop, loop_of_two):  # not listed in the manifest: named as a file added since
        assert any("not in the manifest" in p and name.strip("'") in p for p in problems), problems
    else:
        assert any(p.startswith(name) and why in p for p in problems), problems


def test_the_path_probe_names_a_symlink_loop(root, capsys):
    said = loop(root / payloads.TAG)
    code, out, _ = run(capsys, "probe", root, "--json")
    path = next(p for p in json.loads(out)["probes"] if p["name"] == "path")
    assert path["status"] == "confirmed" and "unsafe_path" in path["signals"], path
    assert any(said in line for line in path["evidence"]), path["evidence"]
