"""The tool as people install it (issue 20, point 1): a wheel that carries its rules, their
example logs and the JSON schemas, installed into a fresh venv and run outside the checkout.

Examples are checked by `rules lint` and the suite, never when classifying: a copy of the rules
without the corpus still diagnoses.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
import yaml

from tests.conftest import ROOT
from triage.errors import EXIT_BAD_RULES, EXIT_FOUND

DEMO = "corpus/cases/job-zero3-train-then-stage2-load.log"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    src = tmp_path_factory.mktemp("src") / "ds-triage"
    # Build from a copy: the build leaves build/ and *.egg-info behind, never in the checkout.
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".venv", ".git", "build", "*.egg-info", "__pycache__",
                                                             "site", ".pytest_cache", ".hypothesis"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(src),
                           "-w", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return next(out.glob("ds_triage-*.whl"))


def test_the_wheel_carries_rules_examples_schemas_and_typing(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    rules = {str(p.relative_to(ROOT)) for p in (ROOT / "rules").rglob("*.yaml")}
    assert {f"triage/_bundled/{r}" for r in rules} <= names
    assert "triage/_bundled/rules/schema.json" in names and "triage/py.typed" in names
    schemas = {f"triage/_bundled/docs/schemas/{p.name}" for p in (ROOT / "docs" / "schemas").glob("*.json")}
    assert schemas and schemas <= names
    examples = {e["file"] for r in rules for e in yaml.safe_load((ROOT / r).read_text())["examples"] if "file" in e}
    assert examples and {f"triage/_bundled/{e}" for e in examples} <= names
    assert any(n.endswith("licenses/LICENSE") for n in names)
    # eval's corpus (manifests and logs, not checkpoints) and the pages help texts name
    manifest = yaml.safe_load((ROOT / "corpus" / "manifest.yaml").read_text())
    assert {f"triage/_bundled/corpus/{c['log']}" for c in manifest} <= names
    assert "triage/_bundled/corpus/field/manifest.yaml" in names
    assert not any(n.startswith("triage/_bundled/corpus/checkpoints/") for n in names)
    assert {"triage/_bundled/docs/exit-codes.md", "triage/_bundled/docs/reference/classify.md"} <= names
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert "License-Expression: MIT" in metadata and "Classifier: Typing :: Typed" in metadata


@pytest.mark.slow
def test_a_fresh_venv_with_only_the_wheel_diagnoses_the_demo_log(wheel, tmp_path, cli):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    # without the caller's PYTHONPATH: a checkout's egg-info on it makes pip think ds-triage is installed
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)], capture_output=True, text=True,
                          timeout=900, env=clean)
    assert done.returncode == 0, done.stderr[-3000:]
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    log = shutil.copy(ROOT / DEMO, outside / "job.log")
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "NO_COLOR": "1"}
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import triage; print(triage.__file__)"],
                           capture_output=True, text=True, cwd=outside, env=env, timeout=60)
    assert where.stdout.startswith(str(venv)), where.stdout  # the installed copy, not the checkout
    run = subprocess.run([str(venv / "bin" / "ds-triage"), "classify", str(log)], capture_output=True, text=True,
                         cwd=outside, env=env, timeout=120)
    assert run.returncode == EXIT_FOUND, run.stderr
    assert "[DS-Z001, zero_stage_mismatch]" in run.stdout
    lint = subprocess.run([str(venv / "bin" / "ds-triage"), "rules", "lint", "--examples"], capture_output=True,
                          text=True, cwd=outside, env=env, timeout=300)
    assert lint.returncode == 0 and lint.stdout.strip().endswith("rules OK"), lint.stderr[-2000:]
    # eval measures the bundled corpus, as in a checkout (issue 44: it exited 3, no corpus)
    for args, manifest in ((), ROOT / "corpus" / "manifest.yaml"), (("--set", "field"), ROOT / "corpus" / "field" / "manifest.yaml"):
        done = subprocess.run([str(venv / "bin" / "ds-triage"), "eval", "--json", *args], capture_output=True,
                              text=True, cwd=outside, env=env, timeout=600)
        assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr[-2000:]  # 1: a gate failed
        result = json.loads(done.stdout)
        assert str(venv) in result["corpus"]
        assert result["accuracy"] == json.loads(cli("eval", "--json", *args).stdout)["accuracy"]  # as the checkout
        assert result["cases"]["total"] == len(yaml.safe_load(manifest.read_text()))
    # help texts name a page the installed package holds, not "the ds-triage docs"
    shown = subprocess.run([str(venv / "bin" / "ds-triage"), "classify", "--help"], capture_output=True, text=True,
                           cwd=outside, env={**env, "COLUMNS": "500"}, timeout=60).stdout
    page = re.search(r"(/\S+/reference/classify\.md)", shown).group(1)
    assert page.startswith(str(venv)) and os.path.isfile(page)


def test_a_copy_of_the_rules_without_the_corpus_classifies_and_lint_names_the_missing_examples(cli, tmp_path):
    rules = shutil.copytree(ROOT / "rules", tmp_path / "kb" / "rules")
    run = cli("classify", "--rules", rules, ROOT / DEMO)
    assert run.returncode == EXIT_FOUND and b"DS-Z001" in run.stdout, run.stderr
    lint = cli("rules", "lint", "--rules", rules)
    err = lint.stderr.decode()
    assert lint.returncode == EXIT_BAD_RULES and "Traceback" not in err
    z001 = next(rules.rglob("DS-Z001-*.yaml"))
    line = next(i for i, text in enumerate(z001.read_text().splitlines(), 1) if "file: corpus/" in text)
    assert f"{z001}:{line}: example file corpus/" in err  # the file and line of the example
