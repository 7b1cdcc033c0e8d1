"""The framework scenarios of the corpus generator (issue 18, point 1), without the frameworks:
their commands are built from the table as the generator runs them, and their committed logs
record the framework releases that produced them. Nothing here imports transformers, accelerate,
peft, lightning or trl (the `frameworks` extra is for the generator only)."""

import ast
import os

import pytest

from corpus import layouts as L, runner
from corpus.scenarios import SCENARIOS
from tests.conftest import ROOT
from tests.corpus_cases import manifest

FRAMEWORK = [s for s in SCENARIOS if s.get("layout") and L.LAYOUTS[s["layout"]].get("worker")]


def test_every_framework_layout_has_scenarios_and_a_worker():
    layouts = {s["layout"] for s in FRAMEWORK}
    assert layouts == {n for n, lay in L.LAYOUTS.items() if lay.get("worker")}
    for name in layouts:
        assert (ROOT / "corpus" / "workers" / L.LAYOUTS[name]["worker"]).is_file(), name


@pytest.mark.parametrize("sc", [s for s in FRAMEWORK if s.get("run") != "base"], ids=lambda s: s["id"])
def test_framework_scenario_runs_its_worker(sc):
    lay = L.LAYOUTS[sc["layout"]]
    cmd = runner.build_command(sc, lay, "/ckpt")
    worker = f"corpus/workers/{lay['worker']}"
    assert worker in cmd
    if sc.get("user") == "nobody":  # loaded as uid 65534: the same command behind setpriv
        assert cmd[:len(runner.NOBODY)] == runner.NOBODY
        cmd = cmd[len(runner.NOBODY):]
    if lay.get("launch") == "python":   # one plain process, no torchrun
        assert cmd[:2] == [runner.PY, worker]
    else:
        n = sc.get("args", {}).get("nproc", L.nproc(lay))
        assert cmd[:4] == runner.TORCHRUN + [f"--nproc_per_node={n}"]
    if sc.get("run", "load") == "load":
        assert cmd[cmd.index("--load-dir") + 1] == os.path.normpath(os.path.join("/ckpt", sc.get("load_dir", "")))
    for key, value in sc.get("args", {}).items():
        if key in L.WORKER_KEYS and value != "base":
            assert cmd[cmd.index(f"--{key}") + 1] == str(value)


def test_framework_logs_record_their_releases():
    entries = {e["id"]: e for e in manifest()}
    ids = [s["id"] for s in FRAMEWORK] + ["lightning-deepspeed-resume-on-cpu"]
    assert set(ids) <= set(entries), sorted(set(ids) - set(entries))
    for case_id in ids:
        e = entries[case_id]
        assert e["frameworks"] and all(v[0].isdigit() for v in e["frameworks"].values()), case_id
        assert e["deepspeed"] == "0.19.8" and e["torch"].startswith("2.13.0"), case_id
        assert (ROOT / "corpus" / e["log"]).stat().st_size > 0


def test_neither_the_package_nor_the_suite_imports_a_framework():
    frameworks = {"transformers", "accelerate", "peft", "lightning", "pytorch_lightning", "trl", "datasets"}
    found = []
    # tests/fixtures: the scripts that made captures, kept beside them, ran in a scratch venv with the
    # framework; the suite never imports them (as corpus/workers/fw_*.py)
    suite = [p for p in (ROOT / "tests").rglob("*.py") if (ROOT / "tests" / "fixtures") not in p.parents]
    for path in [*(ROOT / "triage").rglob("*.py"), *suite]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in frameworks]
    assert not found, found
