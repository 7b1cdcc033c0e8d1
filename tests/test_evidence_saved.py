"""A listing of mp_rank_00_model_states.pt alone cannot tell a ZeRO-0 save from a ZeRO-1/2 save whose
optimizer shards are gone: on a listing the saved stage is unknown (never confirmed, never refuted),
and the pasted `ds-triage inspect` of the model states (its real output, run at test time on real
baselines, tests/probe_checkpoints.py) gives the saved stage, precision and world size to the same
layout the probe builds from the file itself (triage/evidence/saved.py, VirtualContext.meta)."""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from corpus import kept

from tests.conftest import ROOT
from tests.probe_checkpoints import layout_base, scenario
from triage import evidence
from triage.classify.classifier import classify
from triage.eval import conversation
from triage.evidence import apply, question
from triage.kb import load_rules
from triage.probe.checks import completeness
from triage.probe.checks import path as path_check
from triage.probe.checks import permission as permission_check

MODEL = "global_step3/mp_rank_00_model_states.pt"


def listing(root) -> str:
    command = f"ls -la {root} {root}/global_step3"
    out = subprocess.run(command.split(), capture_output=True, text=True, check=True).stdout
    return f"$ {command}\n{out}"


def inspected(root, *options: str) -> str:
    """`ds-triage inspect` of the tag's model states, run for real, as pasted (its prompt line first)."""
    path = f"{root}/{MODEL}"
    out = subprocess.run([sys.executable, "-m", "triage", "inspect", *options, path], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    return f"$ ds-triage inspect {' '.join(options + (path,))}\n{out}"


def probed(paste: str, stage: int | None = None):
    ctx = apply.context(evidence.read(paste), None, {"stage": stage} if stage is not None else None)
    return ctx.run_probe(completeness)


def verdict(case: str, paste: str, tmp_path) -> dict:
    (tmp_path / "pasted.txt").write_text(paste)
    log = str(ROOT / "corpus" / "cases" / f"{case}.log")
    done = subprocess.run([sys.executable, "-m", "triage", "triage", "--log", log, "--evidence",
                           str(tmp_path / "pasted.txt"), "--json"], capture_output=True, text=True, cwd=ROOT)
    assert done.stdout, done.stderr
    return json.loads(done.stdout)


def by_category(result: dict) -> dict[str, set]:
    out: dict[str, set] = {}
    for h in result["hypotheses"]:
        out.setdefault(h["category"], set()).add(h["status"])
    return out


@pytest.mark.parametrize("case", ["zero2-dp1-optim-shard-deleted", "zero0-saved-stage2-load-dp1"])
def test_a_listing_of_model_states_alone_decides_neither_the_stage_nor_the_missing_shards(case, tmp_path):
    result = probed(listing(scenario(case)), stage=2)
    assert result.status == "inconclusive" and not {"stage_differs", "optim_missing"} & set(result.checked)
    decided = by_category(verdict(case, listing(scenario(case)), tmp_path))
    assert "confirmed" not in decided.get("zero_stage_mismatch", set()) | decided.get("missing_file", set())
    assert "refuted" not in decided.get("missing_file", set()) | decided.get("zero_stage_mismatch", set())


def test_inspect_of_a_zero2_save_without_its_optimizer_shard_confirms_the_missing_file(tmp_path):
    root = scenario("zero2-dp1-optim-shard-deleted")
    paste = listing(root) + inspected(root)
    assert [e.kind for e in evidence.read(paste)] == ["listing", "inspect"]
    result = probed(paste, stage=2)
    assert result.status == "confirmed" and result.signals == ["optim_missing"], result.evidence
    decided = verdict("zero2-dp1-optim-shard-deleted", paste, tmp_path)
    assert decided["verdict"]["category"] == "missing_file" and decided["verdict"]["status"] == "confirmed"
    assert "confirmed" not in by_category(decided).get("zero_stage_mismatch", set())
    used = next(h for h in decided["hypotheses"] if h["rule_id"] == decided["verdict"]["rule_id"])["evidence_used"]
    assert any("ds-triage inspect" in label for label in used)


def test_inspect_of_a_zero0_save_loaded_at_stage_2_confirms_the_stage_and_a_healthy_one_is_not_flagged():
    root = layout_base("z0-dp1-fp32")
    paste = listing(root) + inspected(root)
    healthy = probed(paste)
    assert healthy.status == "refuted" and not healthy.signals  # every shard a ZeRO-0 save writes is there
    assert probed(listing(root)).status == "inconclusive"  # names alone: not "healthy" either
    staged = probed(paste, stage=2)
    assert staged.status == "confirmed" and staged.signals == ["stage_differs"], staged.evidence


def test_inspect_cut_short_and_inspect_config_under_its_command_line_are_read_too():
    root = scenario("zero2-dp1-optim-shard-deleted")
    full = inspected(root).splitlines()
    cut = full[:next(i for i, line in enumerate(full) if line.startswith(' "param_shapes"')) + 3]
    for paste in ("\n".join(cut), inspected(root, "--config")):
        items = evidence.read(listing(root) + paste)
        assert [e.kind for e in items] == ["listing", "inspect"], paste[:200]
        assert probed(listing(root) + paste, stage=2).signals == ["optim_missing"]
    bare = inspected(root, "--config").split("\n", 1)[1]  # no command line: a ds_config like the load's own
    assert [e.kind for e in evidence.read(bare)] == ["config"]


def test_after_the_listing_the_question_asks_for_the_saved_stage_by_a_command_run_allows():
    root = scenario("zero2-dp1-optim-shard-deleted")
    q = question.deciding(["zero_stage_mismatch", "missing_file"], seen={"listing", "config"}, ckpt=str(root),
                          tag="global_step3")  # the listing and the load's ds_config pasted (or the log gave it)
    assert q.kind == "inspect" and q.command == f"ds-triage inspect {root}/{MODEL}"
    assert any("saved zero_optimization.stage" in m for m in q.means)
    from triage.chat import readonly

    assert not isinstance(readonly.plan(q.command, readonly.Context(root=str(root))), str)  # /run allows it


# ------------------------------------------------------------ what a listing does not show is not cleared

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def as_nobody(command: str) -> str:
    done = subprocess.run(NOBODY + command.split(), capture_output=True, text=True)
    return f"$ {command}\n{done.stdout}{done.stderr}"


def decided(paste: str, log_case: str, given=None):
    log = (ROOT / "corpus" / "cases" / f"{log_case}.log").read_text()
    report = classify(log, rules=load_rules())
    return apply.triage(report, evidence.read(paste), log, given)


def statuses(result) -> dict[str, str]:
    return {p.hypothesis.rule.id: p.decision.status for p in result.probed}


def test_a_listing_without_the_saved_stage_does_not_clear_another_world_size():
    """ZeRO-1 saved on dp 2 (two optimizer shards), loaded on 1: the names say ZeRO-1/2, whose optimizer
    state is partitioned; the stage unknown was taken for ZeRO-0 ("loads on any dp") and DS-P001 refuted."""
    root = scenario("zero1-dp2-saved-load-dp1")
    result = decided(listing(root), "zero1-dp2-saved-load-dp1")
    assert statuses(result)["DS-P001"] == "confirmed", result.verdict


@pytest.fixture
def workspace():
    """A dir the unprivileged user may traverse (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="ds-triage-evidence-"))
    path.chmod(0o755)
    yield path
    subprocess.run(["chmod", "-R", "u+rwx", str(path)], check=False)
    shutil.rmtree(path)


def test_ls_refused_on_every_dir_is_a_permission_fault_not_an_absent_checkpoint(workspace):
    root = workspace / "ckpt"
    shutil.copytree(layout_base("z2-dp1-fp32"), root, symlinks=True)
    root.chmod(0o700)  # root's alone: the job's user (nobody) cannot enter it
    paste = as_nobody(f"ls -la {root} {root}/global_step3")
    assert "Permission denied" in paste
    ctx = apply.context(evidence.read(paste), None)
    assert ctx.run_probe(permission_check).signals == ["unlistable"]
    path = ctx.run_probe(path_check)
    assert path.status == "inconclusive" and "no_checkpoint" not in path.checked  # what it holds is not shown


def test_an_unreadable_framework_file_in_the_listing_is_not_called_readable(workspace):
    (case, source), = conversation.cases({"accelerate-scheduler-unreadable"})
    root = kept.unpack(case, workspace / case["id"])
    loaded = kept.given(case, root, loaded=True)
    paste = as_nobody(f"ls -la {loaded} {loaded}/pytorch_model")
    assert "scheduler.bin" in paste
    assert statuses(decided(paste, "accelerate-scheduler-unreadable"))["DS-A001"] == "inconclusive"  # who is the job?
    result = decided(as_nobody("id") + paste, "accelerate-scheduler-unreadable")
    assert statuses(result)["DS-A001"] == "confirmed", result.verdict


def test_a_listing_of_another_dir_than_the_log_loads_does_not_clear_its_level():
    """The log loads /tmp/ds-triage-corpus/.../global_step3 (a tag dir); a listing of a copy elsewhere shows
    nothing of that dir: DS-F005 (a tag dir given as the load dir) is not refuted by it."""
    root = scenario("zero2-dp1-load-global-step-dir")
    result = decided(listing(root), "zero2-dp1-load-global-step-dir")
    assert statuses(result)["DS-F005"] == "inconclusive", result.verdict


def test_a_root_listing_of_tag_dirs_without_latest_is_a_checkpoint_whose_latest_is_missing():
    """A save killed before it wrote `latest`: the root's listing shows global_step3 and no `latest`."""
    root = scenario("killed-save-zero2-load-latest")
    command = f"ls -la {root}"
    paste = f"$ {command}\n" + subprocess.run(command.split(), capture_output=True, text=True, check=True).stdout
    ctx = apply.context(evidence.read(paste), None)
    assert ctx.ckpt.root == str(root) and ctx.ckpt.tags == ["global_step3"]
    result = decided(paste, "killed-save-zero2-load-latest")
    assert statuses(result)["DS-F004"] == "confirmed", result.verdict
