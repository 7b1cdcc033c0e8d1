"""`ds-triage eval`: the computation on hand-built outcomes, the CLI, the corpus gates."""

import json
import subprocess
import sys
import textwrap

import jsonschema
import pytest
import yaml

from tests.rule_files import valid_rule
from tests.conftest import CORPUS, ROOT
from triage.errors import BadInput
from triage.eval.corpus import load_cases, run_cases
from triage.eval.render import render
from triage.eval.evaluate import TOP1_GATE, Case, Guess, Outcome, evaluate
from triage.kb.source import load_yaml

SCHEMA = json.loads((ROOT / "docs" / "schemas" / "eval.schema.json").read_text())


def validate(data: dict) -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.Draft202012Validator(SCHEMA).validate(data)


def g(rule_id, category, confidence):
    return Guess(rule_id, category, confidence)


def out(case_id, kind, expected=None, guesses=(), ms=1.0, lines=100, rule=None):
    case = Case(case_id, f"cases/{case_id}.log", kind, expected, rule)
    return Outcome(case, tuple(guesses), ms / 1000, lines)


ZERO, MISSING, CORRUPT = "zero_stage_mismatch", "missing_file", "corrupt_file"


@pytest.fixture
def mixed():
    """Ten cases whose right answers are worked out in the tests below."""
    return [
        out("f1", "failure", ZERO, [g("DS-Z001", ZERO, 0.8)], ms=1),
        out("f2", "failure", MISSING, [g("DS-Z001", ZERO, 0.75), g("DS-F001", MISSING, 0.55)], ms=3),
        out("f3", "failure", MISSING, [], ms=2),
        out("s1", "silent", MISSING, [g("DS-F004", MISSING, 0.8)], ms=10, rule="DS-F004"),
        out("f4", "failure", CORRUPT, [g("DS-X001", "unknown", 0.6), g("DS-K001", CORRUPT, 0.5)], ms=4, rule="DS-K001"),
        out("n1", "negative", "unknown", [g("DS-X002", "unknown", 0.7)], ms=5),
        out("n2", "negative", "unknown", [g("DS-Z001", ZERO, 0.6)], ms=6),
        out("n3", "negative", "unknown", [], ms=7),
        out("c1", "clean", None, [], ms=8, lines=1000),
        out("c2", "clean", MISSING, [g("DS-F004", MISSING, 0.4), g("DS-A001", "permission_denied", 0.36)], ms=9, lines=3000),
    ]


def test_category_accuracy_top1_top3_and_per_category(mixed):
    result = evaluate(mixed)
    assert result.counts == {"failure": 4, "silent": 1, "negative": 3, "clean": 2, "total": 10}
    # top-1 right: f1, s1; top-3 also f2 (second guess) and f4 (second guess); f3 fired nothing
    assert (result.overall.cases, result.overall.top1, result.overall.top3) == (5, 2, 4)
    data = result.to_json()["accuracy"]
    assert (data["top1_rate"], data["top3_rate"]) == (0.4, 0.8)
    by = data["by_category"]
    assert list(by) == [CORRUPT, MISSING, ZERO]
    # unknown: the best answer is no checkpoint cause (f3 fired nothing, f4's best rule is a non-checkpoint one)
    assert data["unknown"] == 2
    assert by[ZERO] == {"cases": 1, "top1": 1, "top3": 1, "top1_rate": 1.0, "top3_rate": 1.0, "unknown": 0}
    assert by[MISSING] == {"cases": 3, "top1": 1, "top3": 2, "top1_rate": 0.3333, "top3_rate": 0.6667, "unknown": 1}
    assert by[CORRUPT] == {"cases": 1, "top1": 0, "top3": 1, "top1_rate": 0.0, "top3_rate": 1.0, "unknown": 1}


def test_confusion_matrix_counts_expected_by_predicted_top1(mixed):
    assert evaluate(mixed).to_json()["confusion"] == {
        CORRUPT: {"unknown": 1},
        MISSING: {"missing_file": 1, "unknown": 1, ZERO: 1},
        ZERO: {ZERO: 1},
    }


def test_misclassified_lists_top3_with_confidences(mixed):
    data = evaluate(mixed).to_json()["misclassified"]
    assert [(m["id"], m["expected"]) for m in data] == [("f2", MISSING), ("f3", MISSING), ("f4", CORRUPT)]
    assert data[0]["got"] == [
        {"rule_id": "DS-Z001", "category": ZERO, "confidence": 0.75},
        {"rule_id": "DS-F001", "category": MISSING, "confidence": 0.55},
    ]
    assert data[1]["got"] == []


def test_negatives_count_only_checkpoint_diagnoses(mixed):
    data = evaluate(mixed).to_json()["negatives"]
    # n1's best rule is a non-checkpoint (unknown) rule: not a false positive
    assert (data["cases"], data["diagnosed"], data["false_positive_rate"]) == (3, 1, 0.3333)
    assert [c["id"] for c in data["diagnosed_cases"]] == ["n2"]


def test_clean_logs_firing_and_false_positives_per_million_lines(mixed):
    data = evaluate(mixed).to_json()["clean"]
    assert (data["cases"], data["fired"], data["firings"], data["lines"]) == (2, 1, 2, 4000)
    assert data["false_positives_per_million_lines"] == 500.0  # 2 firings in 4,000 lines
    assert [c["id"] for c in data["fired_cases"]] == ["c2"]


def test_rule_level_accuracy_only_where_expected_rule_is_given(mixed):
    data = evaluate(mixed).to_json()["rule_accuracy"]
    assert (data["cases"], data["top1"], data["top1_rate"]) == (2, 1, 0.5)
    assert [(w["id"], w["expected_rule"]) for w in data["wrong"]] == [("f4", "DS-K001")]
    assert evaluate([out("f1", "failure", ZERO, [g("DS-Z001", ZERO, 0.8)])]).to_json()["rule_accuracy"]["top1_rate"] is None


def test_timing_median_and_worst(mixed):
    timing = evaluate(mixed).to_json()["timing"]
    # 1..10 ms: the median of ten is (5 + 6) / 2
    assert timing == {"logs": 10, "median_ms": 5.5, "worst_ms": 10.0, "worst_log": "cases/s1.log"}


def test_gates(mixed):
    result = evaluate(mixed)
    assert not result.passed
    assert {g.name: g.passed for g in result.gates} == {"top1": False, "negatives": False, "clean": False}
    good = evaluate([out("f1", "failure", ZERO, [g("DS-Z001", ZERO, 0.8)]), out("n", "negative", "unknown"),
                     out("c", "clean")])
    assert good.passed and [g.passed for g in good.gates] == [True, True, True]


def test_top1_gate_boundary_and_empty_corpus():
    right = [out(f"r{i}", "failure", ZERO, [g("DS-Z001", ZERO, 0.8)]) for i in range(19)]
    wrong = [out("w", "failure", ZERO, [])]
    assert TOP1_GATE == 0.95
    assert evaluate(right + wrong).gates[0].passed  # 19 / 20 = 0.95
    assert not evaluate(right + wrong + wrong).gates[0].passed  # 19 / 21
    empty = evaluate([])
    assert not empty.passed and "no failure or silent case" in empty.gates[0].detail
    validate(empty.to_json())


def test_json_validates_against_its_schema(mixed):
    validate(evaluate(mixed).to_json())
    validate(evaluate(mixed).to_json(corpus="corpus", rule_set={"directory": "rules", "count": 3, "digest": "ab"}))


def test_human_output_is_aligned_tables(mixed):
    text = render(evaluate(mixed), "corpus", 3)
    assert "10 logs (4 failure, 1 silent, 3 negative, 2 clean); 3 rules" in text
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("accuracy"))
    overall = next(line for line in lines if line.startswith("overall"))
    assert len(header) == len(overall)  # right-aligned columns end together
    assert "negatives: 1 of 3 diagnosed" in text and "clean: 1 of 2 logs fired a rule" in text
    assert "f2" in text and "DS-Z001 zero_stage_mismatch 0.75, DS-F001 missing_file 0.55" in text
    assert "worst 10.0 ms (cases/s1.log)" in text
    assert text.rstrip().splitlines()[-1].startswith("gates: FAIL")


# --- reading a corpus ---------------------------------------------------------------


def write_corpus(directory, cases: list[dict], logs: dict[str, str]):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "manifest.yaml").write_text(yaml.safe_dump(cases))
    for name, text in logs.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)
    return directory


def test_load_cases_reads_manifest_and_skips_cases_without_log(tmp_path):
    corpus = write_corpus(tmp_path / "c", [
        {"id": "a", "log": "cases/a.log", "kind": "failure", "expected_category": ZERO, "expected_rule": "DS-Z001"},
        {"id": "b", "kind": "clean"},
        {"id": "c", "log": "clean/c.log", "kind": "clean", "expected_category": None},
    ], {})
    assert load_cases(corpus) == [Case("a", "cases/a.log", "failure", ZERO, "DS-Z001"),
                                  Case("c", "clean/c.log", "clean", None, None)]


@pytest.mark.parametrize("manifest, problem", [
    ("- [unclosed\n", "cannot read the manifest"),
    ("id: a\n", "expected a list of cases"),
    ("- id: a\n  log: a.log\n  kind: weird\n", "kind 'weird' is not one of"),
    ("- id: a\n  log: a.log\n  kind: failure\n", "needs expected_category"),
    ("- log: a.log\n  kind: clean\n", "lacks 'id'"),
])
def test_bad_manifest_is_one_clear_error(tmp_path, manifest, problem):
    (tmp_path / "manifest.yaml").write_text(manifest)
    with pytest.raises(BadInput) as caught:
        load_cases(tmp_path)
    assert problem in caught.value.message and "\n" not in caught.value.message




# --- the command line -----------------------------------------------------------------

TRACEBACK = """\
[rank0]: Traceback (most recent call last):
[rank0]:   File "/x/deepspeed/runtime/state_dict_factory.py", line 112, in check_ckpt_list
[rank0]:     assert len(self.ckpt_list) > 0
[rank0]: AssertionError
"""



@pytest.fixture
def tiny(tmp_path):
    """A one-rule knowledge base and a three-case corpus it gets right."""
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "schema.json").write_text((ROOT / "rules" / "schema.json").read_text())
    (rules / "DS-T001-test.yaml").write_text(textwrap.dedent(valid_rule()))
    corpus = write_corpus(tmp_path / "corpus", [
        {"id": "fail", "log": "cases/fail.log", "kind": "failure", "expected_category": ZERO},
        {"id": "neg", "log": "cases/neg.log", "kind": "negative", "expected_category": "unknown"},
        {"id": "ok", "log": "clean/ok.log", "kind": "clean"},
    ], {"cases/fail.log": TRACEBACK, "cases/neg.log": "RuntimeError: CUDA error\n", "clean/ok.log": "step 1 loss 0.5\n"})
    return corpus, rules


def test_missing_log_is_bad_input(tiny):
    from triage.kb import load_rules

    corpus, rules = tiny
    (corpus / "cases" / "fail.log").unlink()
    with pytest.raises(BadInput, match="cannot read the log of case fail"):
        run_cases(corpus, load_cases(corpus), load_rules(rules, use_cache=False))


def test_cli_exit_0_when_gates_pass(cli, tiny):
    corpus, rules = tiny
    result = cli("eval", corpus, "--rules", rules)
    assert result.returncode == 0, result.stderr.decode()
    text = result.stdout.decode()
    assert "gates: pass" in text and "misclassified: none" in text
    assert result.stderr == b""


def test_cli_exit_1_when_a_clean_log_fires(cli, tiny):
    corpus, rules = tiny
    (corpus / "clean" / "ok.log").write_text(TRACEBACK)
    result = cli("eval", corpus, "--rules", rules, "--json")
    assert result.returncode == 1
    data = json.loads(result.stdout)
    validate(data)
    assert data["clean"]["fired"] == 1 and data["gates"]["passed"] is False
    assert result.stderr.decode().strip() == "ds-triage: eval gates failed: 1 of 1 clean logs fired a rule"


def test_cli_eval_imports_neither_torch_nor_deepspeed(tiny):
    corpus, rules = tiny
    code = textwrap.dedent(f"""\
        import sys
        from triage.cli import main
        rc = main(["eval", {str(corpus)!r}, "--rules", {str(rules)!r}, "--json"])
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "deepspeed"))
        print("HEAVY", heavy, file=sys.stderr)
        sys.exit(rc)
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr.decode()
    assert "HEAVY []" in result.stderr.decode()


def test_cli_missing_manifest_is_exit_3_one_line(cli, tmp_path):
    result = cli("eval", tmp_path)
    assert result.returncode == 3
    err = result.stderr.decode()
    assert err == f"ds-triage: error: {tmp_path} has no manifest.yaml: pass a corpus directory (default: the bundled corpus/)\n"
    assert result.stdout == b""


def test_cli_missing_dir_is_exit_3(cli, tmp_path):
    result = cli("eval", tmp_path / "nope")
    assert result.returncode == 3
    assert result.stderr.decode().startswith("ds-triage: error: no such corpus directory:")
    assert "Traceback" not in result.stderr.decode()


def test_cli_usage_error_is_exit_2(cli):
    assert cli("eval", "--no-such-option").returncode == 2


def test_cli_json_on_the_committed_corpus_matches_its_schema(cli):
    result = cli("eval", "--json")
    assert result.returncode in (0, 1), result.stderr.decode()
    data = json.loads(result.stdout)
    validate(data)
    manifest = load_yaml((CORPUS / "manifest.yaml").read_text())
    assert data["cases"]["total"] == sum(1 for entry in manifest if entry.get("log"))
    assert data["gates"]["passed"] == (result.returncode == 0)


# --- the committed corpus ------------------------------------------------------------


def _misclassified(data) -> str:
    return "\n".join(
        f"  {m['id']}: expected {m['expected']}, got "
        + (", ".join(f"{x['rule_id']} {x['category']} {x['confidence']}" for x in m["got"]) or "nothing")
        for m in data["misclassified"]
    )


def test_no_negative_or_clean_log_is_diagnosed(corpus_outcomes):
    data = evaluate(corpus_outcomes).to_json()
    assert data["negatives"]["diagnosed_cases"] == [], "non-checkpoint failures diagnosed as checkpoint failures"
    assert data["clean"]["fired_cases"] == [], "rules fired on logs of healthy runs"


# Floors under the measured accuracy, so a rule change that loses cases fails the
# suite. Raise them when accuracy improves; never lower them to make a change pass.
TOP1_FLOOR = 0.88
TOP3_FLOOR = 0.96


def test_corpus_accuracy_does_not_regress(corpus_outcomes):
    data = evaluate(corpus_outcomes).to_json()
    top1, top3 = data["accuracy"]["top1_rate"], data["accuracy"]["top3_rate"]
    assert top1 >= TOP1_FLOOR and top3 >= TOP3_FLOOR, (
        f"top-1 {top1} (floor {TOP1_FLOOR}), top-3 {top3} (floor {TOP3_FLOOR}); misclassified:\n{_misclassified(data)}")


@pytest.mark.xfail(strict=True, reason=(
    "issue 3's target, out of reach from logs alone: `ds-triage eval` finds 7 groups of corpus logs that "
    "are the same text for different causes, so no log-only classifier gets more than 97 of 104 (93.3%); "
    "more differ only in lines that say nothing about the cause. The probe layer tells them apart "
    "(test_corpus_same_log_groups_bound_the_accuracy). strict: when this passes, drop the mark."))
def test_committed_corpus_meets_the_top1_target(corpus_outcomes):
    result = evaluate(corpus_outcomes)
    data = result.to_json()
    assert result.passed, f"top-1 {data['accuracy']['top1_rate']} < {TOP1_GATE}:\n{_misclassified(data)}"


def test_corpus_same_log_groups_bound_the_accuracy(corpus_outcomes):
    # The ceiling is an upper bound for any log-only classifier, ours included: if the fingerprint
    # merged logs that really differ, the measured top-1 could exceed it.
    data = evaluate(corpus_outcomes).to_json()
    same = data["same_log"]
    assert data["accuracy"]["top1"] <= same["top1_ceiling"] < data["accuracy"]["cases"]
    # the measured reason issue 3's 95% gate is out of reach for any classifier of the log alone, on the
    # 0.19.8 corpus it was measured on (the older release pairs' cases, `<id>@<pair>`, add more that differ)
    main = evaluate([o for o in corpus_outcomes if "@" not in o.case.id]).to_json()["same_log"]
    assert main["top1_ceiling_rate"] < TOP1_GATE
    pairs = [{case["id"] for case in group} for group in same["groups"]]
    assert {"zero3-saved-stage2-load-dp2", "zero2-dp2-model-states-deleted"} in pairs
