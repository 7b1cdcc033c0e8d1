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


def _corpus_checkpoints():
    """(id, how to get its dir) for every corpus layout this suite can hold: the direct DeepSpeed
    layouts trained here (pc.layout_base), the framework and older-release ones committed as
    archives (corpus/checkpoints/). killed-save-accelerate-z2-dp1-fp32 is neither: it needs accelerate."""
    from corpus import kept
    from corpus.layouts import LAYOUTS

    out = [(name, None) for name, lay in LAYOUTS.items() if not lay.get("framework")]
    out += [(str(a.relative_to(kept.ARCHIVES))[:-len(".tar.xz")], a) for a in sorted(kept.ARCHIVES.rglob("*.tar.xz"))]
    return out


CHECKPOINTS = _corpus_checkpoints()


def _checkpoint_dir(name, archive, tmp_path):
    import tarfile

    from corpus.layouts import LAYOUTS

    if archive is None:
        return pc.layout_base(name)
    with tarfile.open(archive, "r:xz") as tar:
        tar.extractall(tmp_path, filter="data")
    layout = name.rsplit("/", 1)[-1]
    root = tmp_path / layout
    return root / "model" if layout == "pretrained" else root / LAYOUTS[layout].get("sub", "")


@pytest.fixture(scope="module")
def trained_baselines():
    """The direct layouts' baselines, any missing built at once (one launch per world size)."""
    pc.baselines()
    pc.layout_bases([name for name, archive in CHECKPOINTS if archive is None])


@pytest.mark.parametrize("name,archive", CHECKPOINTS, ids=[c[0] for c in CHECKPOINTS])
def test_every_corpus_checkpoint_gets_an_estimate(name, archive, tmp_path, trained_baselines):
    from triage.probe.checks import memory
    from triage.probe.context import ProbeContext

    root = _checkpoint_dir(name, archive, tmp_path)
    result = memory.probe(ProbeContext.for_path(str(root), ranks_per_node=2))
    assert result.status in ("refuted", "inconclusive"), result  # kilobytes to ~100 MiB: they fit here
    assert result.facts["per_rank_bytes"] > 0 and result.facts["need_bytes"] == 4 * result.facts["per_rank_bytes"]
    assert any(line.startswith("each rank reads about ") for line in result.evidence)


def test_a_pipeline_rank_counts_its_stage_share_of_the_layer_files():
    from triage.probe.checks import memory
    from triage.probe.context import ProbeContext

    tag = pc.layout_base("pp2-fp32") / "global_step3"
    layers = sum(p.stat().st_size for p in tag.glob("layer_*-model_states.pt"))
    stage_file = max(p.stat().st_size for p in tag.glob("mp_rank_*_model_states.pt"))
    result = memory.probe(ProbeContext.for_path(str(tag.parent), ranks_per_node=1))
    assert result.facts["per_rank_bytes"] == stage_file + -(-layers // 2)  # two stages share the layers


def test_a_model_dir_is_sized_by_the_weight_files_from_pretrained_reads(tmp_path):
    from corpus import kept
    from triage.probe.checks import memory
    from triage.probe.context import ProbeContext

    model = _checkpoint_dir("pretrained", kept.ARCHIVES / "pretrained.tar.xz", tmp_path)
    result = memory.probe(ProbeContext.for_path(str(model), ranks_per_node=1))
    assert result.facts["per_rank_bytes"] == (model / "model.safetensors").stat().st_size
    assert any("as from_pretrained" in line for line in result.evidence)


def test_the_report_names_what_lowers_the_need(cli):
    root = pc.scenario(pc.HEALTHY)
    tag = root / "global_step3"
    model = os.path.getsize(tag / "mp_rank_00_model_states.pt")
    per_rank = model + max(os.path.getsize(p) for p in tag.glob("*_optim_states.pt"))
    _, _, result = memory_result(cli, "probe", root, "--ranks-per-node", 4, "--host-memory", 3 * 2 * per_rank)
    lower = [line for line in result["evidence"] if line.startswith("lower it: ")]
    assert len(lower) == 3, result["evidence"]
    assert "load_optimizer_states=False" in lower[0] and "unsafe" in lower[0]
    assert "universal checkpoint" in lower[1] and "fewer ranks per node: 3 fit" in lower[2]


def test_a_universal_checkpoint_is_read_one_parameter_at_a_time(tmp_path):
    import torch

    from corpus import layouts, runner
    from triage.probe.checks import memory
    from triage.probe.context import ProbeContext

    root = pc.copy_of(pc.HEALTHY, "memory-universal")
    pre = {"run": "ds_to_universal", "flags": ["--inject_missing_state"]}
    assert runner.run(runner.build_command(pre, layouts.LAYOUTS["z2-dp2-fp32"], str(root)), {},
                      tmp_path / "convert.log") == 0, (tmp_path / "convert.log").read_text()[-2000:]
    tag = root / "global_step3_universal"
    largest = max(torch.load(p, weights_only=True)["param"].numel() for p in tag.glob("zero/*/fp32.pt"))
    result = memory.probe(ProbeContext.for_path(str(tag), ranks_per_node=1))
    assert result.facts["per_rank_bytes"] == (tag / "mp_rank_00_model_states.pt").stat().st_size + 3 * 4 * largest
    assert not any("lower it: a universal checkpoint" in line for line in result.evidence)  # it is one
