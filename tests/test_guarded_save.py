"""triage.repair.guarded_save: a real training job (tests/guarded_save_worker.py under torchrun) killed
with SIGKILL in the middle of a save leaves `latest` on the previous good tag, which loads with
real DeepSpeed and verifies against its manifest."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests import probe_checkpoints as pc
from tests.conftest import ROOT
from tests.repair_support import ext_env, load
from triage.repair.guarded_save import STAGING, GuardedSaveError, publish
from triage.manifest import MANIFEST_NAME

pytestmark = pytest.mark.slow
WORKER = ROOT / "tests" / "guarded_save_worker.py"


@pytest.fixture(autouse=True)
def _ds_env(monkeypatch):
    for key, value in ext_env().items():
        monkeypatch.setenv(key, value)


def train(save_dir, nproc, kill):
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
                           str(WORKER), "--save-dir", str(save_dir), "--kill", kill],
                          capture_output=True, text=True, cwd=ROOT, timeout=300, env=dict(os.environ))
    return proc.returncode, proc.stdout + proc.stderr


def test_sigkill_inside_deepspeeds_save_leaves_latest_on_the_good_tag(cli, tmp_path):
    save_dir = tmp_path / "run"
    code, log = train(save_dir, 2, "ds-save")
    assert code != 0 and "SIGKILL" in log, log[-2000:]
    assert (save_dir / "latest").read_text() == "global_step2"
    assert not (save_dir / "global_step4").exists()
    assert (save_dir / STAGING / "global_step4").is_dir()  # the half-written save, out of the way
    proc = cli("verify", save_dir, "--json")
    data = json.loads(proc.stdout)
    assert proc.returncode == 0 and data["manifest"]["ok"] and data["checkpoint"]["tags"] == ["global_step2"]
    result = load(save_dir, world_size=2)
    assert result.ok and result.global_steps == 2, (result.detail, result.log)


def test_sigkill_before_latest_moves_leaves_it_on_the_previous_tag(cli, tmp_path):
    save_dir = tmp_path / "run"
    code, log = train(save_dir, 1, "publish")
    assert code != 0 and "SIGKILL before writing" in log, log[-2000:]
    assert (save_dir / "latest").read_text() == "global_step2"
    # the new tag was whole and is in place with its manifest: a later `repair latest` may take it
    assert (save_dir / "global_step4" / MANIFEST_NAME).is_file()
    assert cli("verify", save_dir / "global_step4").returncode == 0
    plan = json.loads(cli("repair", "latest", save_dir, "--json").stdout)["plan"]
    assert plan["tag"] == "global_step4"


def test_a_broken_staged_tag_is_not_published(tmp_path):
    save_dir = tmp_path / "run"
    shutil.copytree(pc.baselines() / "z2-dp2-fp32", save_dir)
    staged = save_dir / STAGING / "global_step9"
    shutil.copytree(save_dir / "global_step3", staged)
    (staged / "zero_pp_rank_1_mp_rank_00_optim_states.pt").unlink()
    with pytest.raises(GuardedSaveError, match="failed verification.*missing 1 of 2 optimizer shards"):
        publish(str(save_dir), "global_step9")
    assert (save_dir / "latest").read_text() == "global_step3"
    assert not (save_dir / "global_step9").exists() and staged.is_dir()
    assert not (staged / MANIFEST_NAME).exists()


def test_publish_writes_the_manifest_then_moves_latest(tmp_path):
    save_dir = tmp_path / "run"
    shutil.copytree(pc.baselines() / "z2-dp2-fp32", save_dir)
    shutil.copytree(save_dir / "global_step3", save_dir / STAGING / "global_step5")
    publish(str(save_dir), "global_step5")
    assert (save_dir / "latest").read_text() == "global_step5"
    manifest = json.loads((save_dir / "global_step5" / MANIFEST_NAME).read_text())
    assert manifest["tag"] == "global_step5" and len(manifest["files"]) == 3
    assert not (save_dir / STAGING / "global_step5").exists()
