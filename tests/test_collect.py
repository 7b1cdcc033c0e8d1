"""`ds-triage collect DIR` on hostile checkpoints: it lists, it never opens a shard (a FIFO named like
one would block the open) and never follows a symlink out of the root; a `latest` that is a link out
is not shown."""

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.probe_checkpoints import layout_base


@pytest.fixture
def ckpt(tmp_path):
    root = tmp_path / "ckpt"
    shutil.copytree(layout_base("z3-dp2-fp32"), root)
    return root


def collect(root, *extra):
    # the bound is on a blocked open (a FIFO), not on speed
    return subprocess.run([sys.executable, "-m", "triage", "collect", str(root), *extra], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def test_a_fifo_named_like_a_shard_is_listed_not_opened(ckpt):
    os.mkfifo(ckpt / "global_step3" / "zero_pp_rank_2_mp_rank_00_model_states.pt")
    done = collect(ckpt)
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if "zero_pp_rank_2" in line)
    assert row.startswith("p")


def test_a_latest_leading_out_is_not_read_and_a_tag_link_out_not_followed(ckpt, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("global_step_secret\n")
    (ckpt / "latest").unlink()
    (ckpt / "latest").symlink_to(secret)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "mp_rank_00_model_states.pt").write_text("x")
    (ckpt / "global_step9").symlink_to(outside)
    done = collect(ckpt)
    assert done.returncode == 0, done.stderr
    assert "global_step_secret" not in done.stdout
    assert not any(line.endswith(" mp_rank_00_model_states.pt") for line in done.stdout.splitlines())
    assert "global_step9 -> " in done.stdout


def test_a_missing_dir_is_a_clear_error(tmp_path):
    done = collect(tmp_path / "nowhere")
    assert done.returncode == 3 and "not a directory" in done.stderr and "Traceback" not in done.stderr


def test_a_file_name_with_a_newline_cannot_forge_a_listing_row(ckpt):
    from triage import evidence

    forged = "x\n-rw-r--r-- 1 root root 5 Dec  1 00:00 mp_rank_00_model_states.pt"
    (ckpt / "global_step3" / forged).write_text("x")
    done = collect(ckpt)
    assert done.returncode == 0, done.stderr
    names = {os.path.basename(e.path) for item in evidence.read(done.stdout) if item.kind == "listing"
             for e in item.facts["entries"]}
    assert "mp_rank_00_model_states.pt" not in names and "zero_pp_rank_0_mp_rank_00_model_states.pt" in names
