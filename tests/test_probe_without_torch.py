"""Commands that run DeepSpeed, where torch and DeepSpeed are not installed (issue 44, item 1).

Run in a real environment without them (tests/no_torch.py: a venv of this one's packages minus torch
and DeepSpeed, so `import torch` and importlib.metadata fail as where they were never installed), on
a real ZeRO-2 baseline: `--reproduce` and `repair fp32 --apply` exit 7 ("cannot be used") before
they start, with one line and no verdict; a library caller of the reproduce probe gets an
inconclusive result; the version probe is inconclusive without a release to judge by, and takes
the loading job's from --deepspeed-version.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests import no_torch
from tests import probe_checkpoints as pc
from triage.errors import EXIT_MISSING

BASE = "z2-dp2-fp32"
LOG = str(pc.ROOT / "corpus/cases/zero3-saved-stage2-load-dp2.log")


@pytest.fixture(scope="module")
def python(tmp_path_factory):
    return no_torch.make(tmp_path_factory.mktemp("without-torch"))


@pytest.fixture(scope="module")
def ckpt():
    return str(pc.layout_base(BASE))


def _cannot_be_used(ran, what: str) -> None:
    assert ran.returncode == EXIT_MISSING == 7, ran.stdout + ran.stderr
    assert ran.stdout == ""  # no report, no verdict
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in ran.stderr, ran.stderr
    assert f"{what} cannot be used here" in lines[0] and "torch" in lines[0] and "not installed" in lines[0]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_probe_reproduce_without_torch_exits_cannot_be_used(python, ckpt, fmt):
    _cannot_be_used(no_torch.run(python, "probe", "--reproduce", "--format", fmt, ckpt), "--reproduce")


def test_triage_reproduce_without_torch_exits_cannot_be_used(python, ckpt):
    _cannot_be_used(no_torch.run(python, "triage", "--log", LOG, "--ckpt", ckpt, "--reproduce"), "--reproduce")


def test_the_probes_that_read_files_run_without_torch(python, ckpt):
    ran = no_torch.run(python, "probe", "--format", "json", ckpt)
    assert ran.returncode == 0, ran.stderr
    assert {p["name"]: p["status"] for p in json.loads(ran.stdout)["probes"]}["integrity"] == "refuted"


def test_repair_fp32_apply_without_deepspeed_exits_cannot_be_used(python, ckpt, tmp_path):
    out = tmp_path / "fp32"
    _cannot_be_used(no_torch.run(python, "repair", "fp32", ckpt, "--apply", "--out", str(out)),
                    "repair fp32 --apply")
    assert not out.exists() and not list(tmp_path.iterdir())  # nothing written, no staging left
    planned = no_torch.run(python, "repair", "fp32", ckpt, "--out", str(out), "--json")  # the dry run says so
    assert planned.returncode == 0, planned.stderr
    notes = json.loads(planned.stdout)["plan"]["notes"]
    assert any("--apply cannot be used here" in n and "torch" in n for n in notes), notes


def test_the_reproduce_probe_called_as_a_library_is_inconclusive(python, ckpt):
    code = ("import json, sys\nfrom triage.probe import checks\nfrom triage.probe.context import ProbeContext\n"
            f"ctx = ProbeContext.for_path({ckpt!r}, reproduce=True)\n"
            "r = checks.run(ctx, ())['reproduce']\nprint(json.dumps(r.to_json()))\n")
    ran = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd=pc.ROOT, timeout=300)
    result = json.loads(ran.stdout)
    assert result["status"] == "inconclusive" and result["signals"] == [], result
    assert "not installed" in result["summary"] and "--reproduce" in result["command"]


def test_a_load_that_could_not_import_torch_is_no_verdict(python):
    """What torchrun prints where torch is missing (a real run) is the environment, not the checkpoint."""
    from triage.probe.checks.reproduce import _environment
    from triage.repair.real_load import LoadResult

    ran = subprocess.run([python, "-m", "torch.distributed.run", "--nproc_per_node=2", "-m", "triage.repair.load_check",
                          "spec.json", "result"], capture_output=True, text=True, cwd=pc.ROOT, timeout=120)
    assert ran.returncode != 0
    failed = LoadResult(ok=False, mode="resume", world_size=2, config_source="the saved ds_config", command="torchrun",
                        seconds=0.1, detail=f"exited {ran.returncode} with 0 of 2 rank(s) reporting",
                        output=ran.stdout + ran.stderr)
    assert _environment(failed) == "No module named 'torch'"


def test_version_probe_is_inconclusive_without_a_release_and_takes_the_jobs(python, ckpt):
    def version(*extra):
        ran = no_torch.run(python, "probe", "--format", "json", ckpt, *extra)
        assert ran.returncode == 0, ran.stderr
        report = json.loads(ran.stdout)
        return next(p for p in report["probes"] if p["name"] == "version"), report["target"]

    alone, _ = version()
    assert alone["status"] == "inconclusive" and "--deepspeed-version" in alone["summary"], alone
    assert "--deepspeed-version" in alone["command"]
    given, target = version("--deepspeed-version", "0.19.8", "--torch-version", "2.5.1")
    assert given["status"] == "refuted", given
    assert given["sources"] == {"ds_version": "--deepspeed-version", "torch_version": "--torch-version"}
    assert (target["ds_version"], target["torch_version"]) == ("0.19.8", "2.5.1")
    older, _ = version("--deepspeed-version", "0.14.0")  # saved by 0.19.8: a fact, not a finding
    assert older["status"] == "refuted" and older["supports"] == ["saved_newer"], older
    assert any("newer than the load's 0.14.0 (--deepspeed-version)" in line for line in older["evidence"])


def test_the_loading_jobs_release_beats_the_installed_one(ckpt):
    """Here DeepSpeed is installed: --deepspeed-version still decides (the job may run another)."""
    ran = subprocess.run([sys.executable, "-m", "triage", "probe", "--format", "json", ckpt,
                          "--deepspeed-version", "0.14.0"], capture_output=True, text=True, cwd=pc.ROOT, timeout=300)
    version = next(p for p in json.loads(ran.stdout)["probes"] if p["name"] == "version")
    assert version["sources"] == {"ds_version": "--deepspeed-version"} and version["supports"] == ["saved_newer"]


@pytest.mark.parametrize("bad", ["latest", "x.y", ""])
def test_a_release_that_is_not_one_is_a_usage_error(ckpt, bad):
    ran = subprocess.run([sys.executable, "-m", "triage", "verify", ckpt, "--deepspeed-version", bad],
                         capture_output=True, text=True, cwd=pc.ROOT, timeout=300)
    assert ran.returncode == 2 and "not a release number" in ran.stderr, ran.stderr


def test_the_chat_takes_the_loading_jobs_releases(python, ckpt):
    def version_line(*extra):
        ran = subprocess.run([python, "-m", "triage", "chat", "--ckpt", ckpt, *extra], input="/probe\n",
                             capture_output=True, text=True, cwd=pc.ROOT, timeout=300)
        return next(line for line in ran.stdout.splitlines() if line.strip().startswith("version "))

    assert "inconclusive" in version_line() and "--deepspeed-version" in version_line()
    given = version_line("--deepspeed-version", "0.14.0", "--torch-version", "2.5.1")
    assert "refuted" in given and "the load's 0.14.0 (--deepspeed-version)" in given, given
