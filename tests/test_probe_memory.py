"""The memory probe on real checkpoints: what every rank reads against what the node has."""

import json
import os

import pytest

from tests import probe_checkpoints as pc
from tests.test_probe_cli import PROBE, TRIAGE, errors

pytestmark = pytest.mark.slow
OOM_LOG = pc.ROOT / "corpus" / "cases" / "big-zero2-load-rlimit-as.log"  # a real allocation failure in load


def memory_result(cli, *args):
    proc = cli(*map(str, args), "--json")
    data = json.loads(proc.stdout)
    assert errors(PROBE if args[0] == "probe" else TRIAGE, data) == []
    return proc.returncode, data, next(p for p in data["probes"] if p["name"] == "memory")


def test_the_estimate_is_the_files_a_rank_reads_twice_times_the_ranks(cli):
    root = pc.scenario(pc.HEALTHY)  # ZeRO-2, dp 2: every rank reads the model file and its own shard
    tag = root / "global_step3"
    per_rank = os.path.getsize(tag / "mp_rank_00_model_states.pt") + max(
        os.path.getsize(p) for p in tag.glob("*_optim_states.pt"))
    need = 2 * per_rank * 3
    code, data, result = memory_result(cli, "probe", root, "--ranks-per-node", 3, "--host-memory", need - 1)
    assert result["status"] == "confirmed" and result["signals"] == ["too_small"]
    assert data["findings"] == ["out_of_memory"] and code == 1
    assert any("x 3 rank(s) on the host (--ranks-per-node)" in line for line in result["evidence"])
    _, _, roomy = memory_result(cli, "probe", root, "--ranks-per-node", 3, "--host-memory", 2 * need)
    assert roomy["status"] == "refuted"
    _, _, tight = memory_result(cli, "probe", root, "--ranks-per-node", 3, "--host-memory", need + need // 2)
    assert tight["status"] == "inconclusive"  # it may fit: no verdict from an estimate


def test_this_hosts_memory_is_read_when_no_size_is_given(cli):
    code, _, result = memory_result(cli, "probe", pc.scenario(pc.HEALTHY), "--ranks-per-node", 2)
    assert result["status"] == "refuted"  # a few MiB on a machine with GiBs
    assert any("MemAvailable of this host" in line or "cgroup memory limit" in line for line in result["evidence"])
    assert code == 0


def test_probe_runs_no_memory_check_unless_asked(cli):
    proc = cli("probe", pc.scenario(pc.HEALTHY), "--json")
    assert "memory" not in [p["name"] for p in json.loads(proc.stdout)["probes"]]


def test_triage_of_an_allocation_failure_confirms_on_a_small_node_and_never_refutes(cli):
    root = pc.scenario(pc.HEALTHY)
    code, data, result = memory_result(cli, "triage", "--log", OOM_LOG, "--ckpt", root, "--host-memory", "1M")
    assert result["status"] == "confirmed"
    assert data["verdict"]["category"] == "out_of_memory" and code == 0
    _, data, result = memory_result(cli, "triage", "--log", OOM_LOG, "--ckpt", root)
    assert result["status"] == "refuted"  # fits here by the estimate; the job's own ulimit is not visible
    oom = [h for h in data["hypotheses"] if h["category"] == "out_of_memory"]
    assert oom and oom[0]["status"] == "inconclusive"


@pytest.mark.parametrize("size", ["lots", "-5G", "0"])
def test_a_bad_size_is_a_usage_error(cli, size):
    proc = cli("probe", pc.scenario(pc.HEALTHY), "--host-memory", size)
    assert proc.returncode == 2 and "--host-memory" in proc.stderr.decode()
