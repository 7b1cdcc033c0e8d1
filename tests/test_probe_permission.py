"""The permission probe run as an unprivileged user (uid 65534 via setpriv): root ignores
permission bits, so only a real other user sees what the loading job sees."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import probe_checkpoints as pc

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv"),
]
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.fixture(scope="module")
def as_nobody(tmp_path_factory):
    from corpus import runner

    # uid 65534 must reach the interpreter, the repo and the checkpoints (o+x on every dir above).
    runner.ensure_traversable([Path(sys.executable).resolve().parent.parent, Path(sys.executable).parent.parent,
                               pc.ROOT, pc.WORK])
    cache = pc.session_dir() / "nobody-cache"
    cache.mkdir(exist_ok=True)
    os.chown(cache, 65534, 65534)

    def run(*args):
        env = dict(os.environ, XDG_CACHE_HOME=str(cache), HOME=str(cache), NO_COLOR="1")
        return subprocess.run(NOBODY + [sys.executable, "-m", "triage", *map(str, args)], cwd=pc.ROOT, env=env,
                              capture_output=True, text=True, timeout=60)

    return run


def probes(proc) -> dict:
    assert proc.returncode in (0, 1), proc.stderr
    return {p["name"]: p for p in json.loads(proc.stdout)["probes"]}


def test_unreadable_optimizer_shard(as_nobody):
    root = pc.scenario("zero2-dp2-optim-shard-unreadable")
    proc = as_nobody("probe", root, "--json")
    assert proc.returncode == 1
    result = probes(proc)
    perm = result["permission"]
    assert perm["status"] == "confirmed" and perm["signals"] == ["unreadable"]
    text = " ".join(perm["evidence"])
    assert "zero_pp_rank_1_mp_rank_00_optim_states.pt" in text and "----------" in text
    assert "owner root" in text and "nobody" in text and "'other' bits apply" in text
    assert perm["command"].startswith("namei -l ")
    assert result["completeness"]["status"] == "refuted"  # the file is there; it cannot be read
    assert result["integrity"]["status"] == "inconclusive"  # that shard could not be checked
    assert json.loads(proc.stdout)["findings"] == ["permission_denied"]


def test_unreadable_tag_dir_is_not_reported_as_missing_shards(as_nobody):
    root = pc.scenario("zero3-dp2-tag-dir-unreadable")
    result = probes(as_nobody("probe", root, "--json"))
    assert result["permission"]["status"] == "confirmed"
    assert result["permission"]["signals"] == ["untraversable"]
    assert result["completeness"]["status"] == "inconclusive"  # cannot list: unknown, not "missing"


def test_healthy_checkpoint_is_readable_by_nobody(as_nobody):
    root = pc.copy_of(pc.HEALTHY, "world-readable")
    from corpus import faults

    faults.make_world_readable(str(root))
    proc = as_nobody("probe", root, "--json")
    assert proc.returncode == 0, proc.stdout
    assert probes(proc)["permission"]["status"] == "refuted"


def test_triage_as_nobody_confirms_permission_denied(as_nobody):
    root = pc.scenario("zero2-dp2-optim-shard-unreadable")
    log = pc.ROOT / "corpus" / "cases" / "zero2-dp2-optim-shard-unreadable.log"
    proc = as_nobody("triage", "--log", log, "--ckpt", root, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["verdict"]["category"] == "permission_denied"


# --as-user: root triaging for the job's user. The probe forks a child that drops to that
# user, so the kernel answers for it; root's own view would pass everything.

def as_root(*args):
    return subprocess.run([sys.executable, "-m", "triage", *map(str, args)], cwd=pc.ROOT,
                          env=dict(os.environ, NO_COLOR="1"), capture_output=True, text=True, timeout=60)


def test_root_sees_the_unreadable_tag_dir_only_as_the_jobs_user():
    root = pc.scenario("zero3-dp2-tag-dir-unreadable")
    as_itself = probes(as_root("probe", root, "--json"))["permission"]
    assert as_itself["status"] == "refuted"
    assert any("--as-user" in line for line in as_itself["evidence"]), as_itself  # says how to check for the job
    as_job = probes(as_root("probe", root, "--as-user", "65534", "--json"))["permission"]
    assert as_job["status"] == "confirmed" and as_job["signals"] == ["untraversable"]
    text = " ".join(as_job["evidence"])
    assert "global_step3: no execute" in text and "d---------" in text and "checked as nobody (uid 65534" in text
    assert "cannot be opened because of it" in text  # the shards below are not blamed on their own modes
    assert as_job["command"].endswith("; id nobody")


def test_triage_as_root_for_the_jobs_user_gives_the_permission_verdict():
    case = "zero2-dp1-tag-dir-unreadable"
    root, log = pc.scenario(case), pc.ROOT / "corpus" / "cases" / f"{case}.log"
    before = pc.snapshot(root)
    blind = json.loads(as_root("triage", "--log", log, "--ckpt", root, "--json").stdout)["verdict"]
    assert blind["category"] != "permission_denied"  # root reads everything: the log's first guess stands
    proc = as_root("triage", "--log", log, "--ckpt", root, "--as-user", "nobody", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["verdict"]["category"] == "permission_denied"
    assert pc.snapshot(root) == before  # read-only, modes included


def test_as_user_errors_are_usage_errors(as_nobody):
    root = pc.scenario("zero3-dp2-tag-dir-unreadable")
    unknown = as_root("probe", root, "--as-user", "no-such-user-here")
    assert unknown.returncode == 2 and "no such user" in unknown.stderr and "Traceback" not in unknown.stderr
    not_root = as_nobody("probe", root, "--as-user", "root")
    assert not_root.returncode == 2 and "only root can check as another user" in not_root.stderr
    assert "Traceback" not in not_root.stderr
