"""The API history names the version skew (issue 18, point 3).

The committed index (triage/kb/api_history.json) is rebuilt from one real release
and compared; then logs in the shape Python prints each error kind, naming real
DeepSpeed names and keywords, get the releases that define them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from triage.classify.classifier import classify
from triage.kb import api_history_build as build
from triage.kb.api_history import load_index

ROOT = Path(__file__).resolve().parents[1]
SMALLEST = "0.3.16"  # the oldest indexed release, 0.4 MB


@pytest.mark.registry
def test_one_real_release_rebuilds_its_column_of_the_committed_index():
    cache = Path(tempfile.gettempdir()) / "ds-triage-api-history"
    cache.mkdir(exist_ok=True)
    sdist = build.fetch("deepspeed", SMALLEST, cache, sdist=True)
    names = build.deepspeed_names(build.python_sources(sdist, "deepspeed"))
    index = load_index()["deepspeed"]
    at = index["releases"].index(SMALLEST)

    def present(table: dict) -> set[str]:
        return {name for name, (first, last) in table.items() if first <= at <= last}

    for owner in ("DeepSpeedEngine", "PipelineEngine", "DeepSpeedZeroOptimizer",
                  "DeepSpeedZeroOptimizer_Stage1", "DeepSpeedZeroOptimizer_Stage3"):
        assert names["classes"][owner] == present(index["classes"][owner]), owner
    assert {m: p for m, p in names["keywords"].items()} == {
        m: present(t) for m, t in index["keywords"].items() if present(t)}
    assert set(names["modules"]) == present(index["modules"])
    assert names["modules"]["deepspeed.utils.zero_to_fp32"] == present(
        index["module_names"]["deepspeed.utils.zero_to_fp32"])


def traceback(*frames: tuple[str, int, str, str], error: str, before: str = "") -> str:
    lines = [before] if before else []
    lines.append("Traceback (most recent call last):")
    for file, line, function, code in frames:
        lines += [f'  File "{file}", line {line}, in {function}', f"    {code}"]
    return "\n".join(lines + [error]) + "\n"


SITE = "/opt/conda/envs/train/lib/python3.10/site-packages"


def test_renamed_optimizer_method_names_its_releases_and_successor():
    log = traceback(
        ("/workspace/train.py", 112, "<module>", "engine.optimizer._restore_from_fp16_weights()"),
        error="AttributeError: 'DeepSpeedZeroOptimizer' object has no attribute '_restore_from_fp16_weights'")
    [note] = classify(log).api_history
    assert (note["kind"], note["owner"], note["name"]) == ("attribute", "DeepSpeedZeroOptimizer", "_restore_from_fp16_weights")
    assert (note["exists_in"], note["first"], note["last"]) == ("0.3 to 0.4", "0.3.16", "0.4.5")
    assert note["successor"] == {"name": "_restore_from_bit16_weights", "from": "0.5", "exists_in": "0.5 to 0.19 (the newest indexed)"}
    assert note["text"].startswith("`DeepSpeedZeroOptimizer._restore_from_fp16_weights` exists in DeepSpeed 0.3 to 0.4; "
                                   "from 0.5 `DeepSpeedZeroOptimizer` has `_restore_from_bit16_weights`")


def test_unexpected_keyword_through_a_framework_compares_with_the_logged_release():
    log = traceback(
        (f"{SITE}/transformers/trainer.py", 2377, "_save_checkpoint", "self.model_wrapped.save_checkpoint(output_dir, exclude_frozen_parameters=True)"),
        error="TypeError: DeepSpeedEngine.save_checkpoint() got an unexpected keyword argument 'exclude_frozen_parameters'",
        before="[2024-03-02 10:01:12,449] [INFO] [logging.py:96:log_dist] [Rank 0] DeepSpeed info: version=0.9.5, git-hash=unknown, git-branch=unknown")
    report = classify(log)
    [note] = report.api_history
    assert (note["kind"], note["owner"], note["exists_in"]) == ("keyword", "DeepSpeedEngine.save_checkpoint", "0.10 to 0.19 (the newest indexed)")
    logged = next(v for v in note["versions"] if v["source"] == "log")
    assert logged == {"source": "log", "version": "0.9.5", "inside": False}
    assert "the log's 0.9.5 lacks it" in note["text"]
    # transformers' own source passes the keyword from 4.40 (indexed: 4.30, 4.40, ... 5.25).
    assert note["callers"] == [{"project": "transformers", "passes_in": "4.40 to 5.25 (the newest indexed)"}]
    # Python before 3.10 prints the bare function name: still recognised.
    older = classify(log.replace("DeepSpeedEngine.save_checkpoint()", "save_checkpoint()")).api_history
    assert older and older[0]["exists_in"] == note["exists_in"]


def test_import_of_a_name_a_later_release_added():
    log = traceback(
        (f"{SITE}/accelerate/utils/deepspeed.py", 24, "<module>", "from deepspeed.utils import safe_get_full_fp32_param"),
        error="ImportError: cannot import name 'safe_get_full_fp32_param' from 'deepspeed.utils' "
              f"({SITE}/deepspeed/utils/__init__.py)")
    [note] = classify(log).api_history
    assert (note["kind"], note["owner"], note["exists_in"], note["first"]) == (
        "module_name", "deepspeed.utils", "0.8 to 0.19 (the newest indexed)", "0.8.3")


def test_removed_module_names_its_successor():
    log = traceback(
        ("/workspace/resume.py", 3, "<module>", "from deepspeed.runtime.zero.stage2 import FP16_DeepSpeedZeroOptimizer"),
        error="ModuleNotFoundError: No module named 'deepspeed.runtime.zero.stage2'")
    [note] = classify(log).api_history
    assert (note["kind"], note["exists_in"]) == ("module", "0.3 to 0.4")
    assert note["successor"]["name"] == "deepspeed.runtime.zero.stage_1_and_2" and note["successor"]["from"] == "0.5"


def test_a_name_no_release_defines_gets_no_range_and_other_errors_get_no_note():
    unknown = traceback(("/workspace/train.py", 9, "<module>", "engine.no_such_thing"),
                        error="AttributeError: 'DeepSpeedEngine' object has no attribute 'no_such_thing_at_all'")
    [note] = classify(unknown).api_history
    assert note["exists_in"] is None and "is in no DeepSpeed release indexed (DeepSpeed 0.3 to 0.19)" in note["text"]
    not_deepspeed = traceback(("/workspace/train.py", 9, "<module>", "model.foo"),
                              error="AttributeError: 'GPT2Model' object has no attribute 'foo'")
    assert classify(not_deepspeed).api_history == []
    not_installed = "ModuleNotFoundError: No module named 'deepspeed'"
    assert classify(traceback(("/workspace/train.py", 1, "<module>", "import deepspeed"), error=not_installed)).api_history == []
    for other in ("TypeError: Trainer.save_checkpoint() got an unexpected keyword argument 'tag'",
                  "TypeError: _load_checkpoint() got an unexpected keyword argument 'tag'"):
        assert classify(traceback(("/workspace/train.py", 9, "<module>", "x()"), error=other)).api_history == []
    real_case = (ROOT / "corpus" / "cases" / "job-zero3-train-then-stage2-load.log").read_text()
    assert classify(real_case).api_history == []


def test_json_and_terminal_reports_carry_it_and_classify_imports_neither_torch_nor_deepspeed(tmp_path):
    log = tmp_path / "job.log"
    log.write_text(traceback(
        ("/workspace/train.py", 112, "<module>", "engine.optimizer._restore_from_fp16_weights()"),
        error="AttributeError: 'DeepSpeedZeroOptimizer' object has no attribute '_restore_from_fp16_weights'"))
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path))
    probe = ("import sys, triage.cli as c\ntry:\n    c.main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'deepspeed')), file=sys.stderr)")
    as_json = subprocess.run([sys.executable, "-c", probe, "classify", "--json", str(log)],
                             capture_output=True, text=True, env=env, cwd=ROOT)
    assert as_json.stderr.splitlines()[-1] == "[]"
    report = json.loads(as_json.stdout)
    assert report["api_history"][0]["exists_in"] == "0.3 to 0.4"
    import jsonschema
    schema = json.loads((ROOT / "docs" / "schemas" / "bundled" / "classify.schema.json").read_text())
    jsonschema.validate(report, schema)
    terminal = subprocess.run([sys.executable, "-m", "triage", "classify", str(log)],
                              capture_output=True, text=True, env=env, cwd=ROOT)
    assert "api history (DeepSpeed releases, from the committed index):" in terminal.stdout
    assert "exists in DeepSpeed 0.3 to 0.4; from 0.5 `DeepSpeedZeroOptimizer` has `_restore_from_bit16_weights`" in terminal.stdout
