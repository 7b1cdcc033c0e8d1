"""Pasted command output read by its shape (triage/evidence/): every kind from a real capture, made
at test time by running the real command on a real DeepSpeed checkpoint (tests/probe_checkpoints.py's
ZeRO-3 baseline) or on this machine; no output is written by hand."""

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.probe_checkpoints import layout_base
from triage import evidence

TAG = "global_step3"


@pytest.fixture(scope="module")
def z3():
    return str(layout_base("z3-dp2-fp32"))


def run(command: str, cwd=None) -> str:
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout


def kinds(text: str) -> dict:
    return {e.kind: e for e in evidence.read(text)}


def shards(item) -> set:
    return {os.path.basename(e.path) for e in item.facts["entries"] if e.path.endswith(".pt")}


WANT = {"zero_pp_rank_0_mp_rank_00_model_states.pt", "zero_pp_rank_1_mp_rank_00_model_states.pt",
        "zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"}


@pytest.mark.parametrize("command", ["ls -l {d}/{t}", "ls -la {d} {d}/{t}", "ls -lh {d}/{t}", "ls -lR {d}",
                                     "ls -la --time-style=long-iso {d}/{t}",
                                     "find {d} -type f -printf '%s %p\\n'", "find {d} -type f", "du -a {d}",
                                     "du -ah {d}", "stat {d}/{t}/*", "tree {d}", "tree -s -p -u -g {d}"])
def test_every_listing_kind_is_read_as_the_checkpoints_files(z3, command):
    text = run(command.format(d=z3, t=TAG))
    item = kinds(text)["listing"]
    assert shards(item) == WANT, text
    assert "log" not in kinds(text), text
    if "-printf" in command or "stat" in command or command.startswith("ls -l "):
        sizes = {os.path.basename(e.path): e.size for e in item.facts["entries"] if e.path.endswith(".pt")}
        assert sizes == {n: os.path.getsize(os.path.join(z3, TAG, n)) for n in WANT}


def test_the_rest_by_shape(z3):
    assert kinds(run(f"cat {z3}/latest; echo"))["latest"].facts["latest"] == TAG
    who = kinds(run("id"))["identity"].facts
    assert who["uid"] == os.getuid()
    assert kinds("$ whoami\n" + run("whoami"))["identity"].facts["user"]
    chain = kinds(run(f"namei -l {z3}/{TAG}"))["namei"].facts["chain"]
    assert chain[-1]["path"] == f"{z3}/{TAG}" and chain[0]["path"] == "/"
    assert kinds(run(f"findmnt -T {z3}"))["mounts"].facts["mounts"][0]["target"] == "/"
    assert kinds(run("mount"))["mounts"].facts["mounts"]
    assert kinds(run("cat /proc/mounts"))["mounts"].facts["mounts"]
    assert kinds(run("free -g"))["memory"].facts["unit"] in ("KiB", "GiB", "as shown")
    py = f"{sys.executable} -m pip"
    ds = kinds(run(f"{py} show deepspeed torch"))["versions"].facts
    assert ds["ds_version"] and ds["torch_version"]
    assert kinds(run(f"{py} list 2>/dev/null"))["versions"].facts["ds_version"] == ds["ds_version"]
    report = run(f"{os.path.dirname(sys.executable)}/ds_report 2>&1", cwd="/tmp")
    assert kinds(report)["versions"].facts == {"ds_version": ds["ds_version"], "torch_version": ds["torch_version"]}
    printed = run(f"{sys.executable} -c 'import deepspeed; print(deepspeed.__version__)' 2>/dev/null",
                  cwd="/tmp").strip().splitlines()[-1]
    assert kinds(printed)["versions"].facts["ds_version"] == ds["ds_version"]


def test_a_saved_ds_config_and_printed_keys(z3):
    shard = f"{z3}/{TAG}/zero_pp_rank_0_mp_rank_00_model_states.pt"
    config = run(f"cd {ROOT} && {sys.executable} -m triage.probe.safe_pickle --config {shard}")
    assert kinds(config)["config"].facts["config"]["zero_optimization"]["stage"] == 3
    keys = run(f"{sys.executable} -c \"import torch; sd=torch.load('{shard}', map_location='cpu', weights_only=False); "
               "print(list(sd.keys()))\" 2>/dev/null", cwd="/tmp").strip().splitlines()[-1]
    assert "module" in kinds(keys)["keys"].facts["keys"]


def test_a_git_lfs_pointer_and_an_html_page_by_their_first_bytes(tmp_path):
    # real files from real tools: git-lfs's spec line is what `git lfs pointer` writes; python's
    # http.server writes the HTML error page
    if shutil.which("git-lfs") is None:
        pytest.fail("git-lfs is needed to make a real Git LFS pointer: apt-get install git-lfs")
    lfs = run(f"cd {tmp_path} && printf abc > f && git lfs pointer --file=f 2>/dev/null")
    found = kinds(f"$ head -c 200 {tmp_path}/f\n" + lfs)["head"].facts
    assert found["problem"] == "lfs_pointer" and found["file"] == f"{tmp_path}/f" and "3 bytes" in found["detail"]
    page = run(f"{sys.executable} -c \"from http.server import BaseHTTPRequestHandler as H; "
               "print(H.error_message_format % dict(code=404, message='File not found', explain='Nothing matches'))\"")
    assert kinds(page)["head"].facts["problem"] == "garbage"


def test_no_corpus_log_is_taken_for_command_output():
    logs = sorted((ROOT / "corpus" / "cases").glob("*.log"))
    assert len(logs) > 100
    for path in logs:
        found = [e.kind for e in evidence.read(path.read_text(errors="replace")) if e.kind != "log"]
        assert not found, (path.name, found)


@pytest.mark.parametrize("command, where, tag", [("ls -la", TAG, "TAG"), ("cat latest; echo; ls -la . " + TAG, ".", TAG),
                                                 ("find . -type f -printf '%s %p\\n'", ".", TAG)])
def test_a_listing_made_in_the_dir_itself_is_placed_under_stand_ins(z3, command, where, tag):
    from triage.evidence.apply import context

    ctx = context(evidence.read(run(command, cwd=os.path.join(z3, where))), None)
    assert ctx.ckpt.root == "…/CKPT" and ctx.ckpt.tag == tag
    assert {s.name for s in ctx.listing.shards} == WANT
