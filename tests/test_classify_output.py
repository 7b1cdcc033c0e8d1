"""`ds-triage classify` as a user or a script runs it: the JSON report keeps its
documented schema, the human report orders the checks, exit codes say what was found,
and classifying never imports torch, deepspeed or jsonschema."""

import json
import os
import pty
import subprocess
import sys

import jsonschema
import pytest

from tests.conftest import ROOT
from tests.corpus_cases import manifest
from triage.classify.classifier import classify
from triage.errors import EXIT_FOUND, EXIT_UNKNOWN
from triage.classify.report import CATEGORY_PHASE, PHASES

SCHEMA = json.loads((ROOT / "docs" / "schemas" / "classify.schema.json").read_text())
# checked once: jsonschema.validate checks the schema itself on every call (most of 260 cases' time)
VALIDATOR = jsonschema.validators.validator_for(SCHEMA)(SCHEMA)
jsonschema.validators.validator_for(SCHEMA).check_schema(SCHEMA)
CASES = [e for e in manifest() if e["kind"] != "clean"]


@pytest.mark.parametrize("entry", CASES, ids=lambda e: e["id"])
def test_json_report_matches_its_schema(entry, rules):
    text = (ROOT / "corpus" / entry["log"]).read_text(encoding="utf-8", errors="replace")
    data = classify(text, rules=rules, facts={"ckpt": "/data/ckpt", "tag": "global_step3"}).to_json()
    VALIDATOR.validate(data)
    confidences = [h["confidence"] for h in data["hypotheses"]]
    assert confidences == sorted(confidences, reverse=True)
    assert data["category"] == (data["hypotheses"][0]["category"] if data["hypotheses"] else "unknown")
    for h in data["hypotheses"]:
        assert h["evidence"], f"{h['rule_id']} fired without evidence"
        assert all("{" not in step["command"] for step in h["verify"]), "a placeholder was left in a command"


def test_cli_json_from_stdin_and_exit_codes(cli):
    failing = (ROOT / "corpus" / "cases" / "zero2-dp2-saved-load-dp1.log").read_bytes()
    result = cli("classify", "-", "--json", stdin=failing)
    assert result.returncode == EXIT_FOUND, result.stderr
    data = json.loads(result.stdout)
    jsonschema.validate(data, SCHEMA)
    assert data["hypotheses"][0]["category"] == "parallelism_mismatch"
    negative = cli("classify", ROOT / "corpus" / "cases" / "negative-shape.log", "--json")
    assert negative.returncode == EXIT_UNKNOWN
    assert json.loads(negative.stdout)["category"] == "unknown"


def test_human_report_lists_checks_in_verification_order(cli):
    result = cli("classify", ROOT / "corpus" / "cases" / "zero3-saved-stage2-load-dp2.log",
                 "--ckpt", "/data/my ckpt", "--tag", "global_step3")
    out = result.stdout.decode()
    assert result.returncode == EXIT_FOUND
    verify = out.split("verify, in order", 1)[1].split("\nfix", 1)[0]
    ids = [line.split("]")[0].strip(" [") for line in verify.splitlines() if line.startswith("  [")]
    from triage.kb import load_rules

    phases = [PHASES.index(CATEGORY_PHASE[load_rules(ROOT / "rules").by_id(i).category]) for i in ids]
    assert phases == sorted(phases) and len(set(ids)) > 1
    assert "'/data/my ckpt'/global_step3" in verify  # shell-quoted, ready to paste


def test_classify_imports_neither_torch_nor_deepspeed_nor_jsonschema_nor_other_commands_modules(tmp_path):
    import os
    import subprocess
    import sys

    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    probe = ("import sys, triage.cli as c; c.main(['classify', sys.argv[1]]); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'deepspeed', 'jsonschema', 'msgspec', "
             "'tqdm', 'pyspark', 'prometheus_client', 'shtab', 'hyperscan') or m in ('triage.stream.records', 'triage.stream.scan')), "
             "file=sys.stderr)")
    log = str(ROOT / "corpus" / "cases" / "zero3-saved-stage2-load-dp2.log")
    first = subprocess.run([sys.executable, "-c", probe, log], capture_output=True, text=True, env=env, cwd=ROOT)
    second = subprocess.run([sys.executable, "-c", probe, log], capture_output=True, text=True, env=env, cwd=ROOT)
    assert "torch" not in first.stderr.splitlines()[-1] and "deepspeed" not in first.stderr.splitlines()[-1]
    # The first run validated the rules (jsonschema) and cached them; later runs read the cache.
    assert second.stderr.splitlines()[-1] == "[]"


@pytest.mark.parametrize("command, example", [("classify", "ds-triage classify - < job.log"),
                                              ("stream", "kubectl logs -f POD | ds-triage stream")])
def test_no_log_on_a_terminal_is_a_usage_error_not_a_wait(command, example, tmp_path):
    """stdin a real pseudo-terminal: nothing given must not sit waiting for a paste."""
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "triage", command], stdin=terminal, capture_output=True,
                              timeout=60, env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path)))
    finally:
        os.close(terminal)
        os.close(controller)
    assert proc.returncode == 2
    assert f"no log given: pass a file, or pipe it in (`{example}`)" in proc.stderr.decode()
