"""`ds-triage eval`'s accuracy per DeepSpeed / torch release pair and per framework."""

import json


from tests.conftest import CORPUS
from tests.test_eval import validate, write_corpus
from triage.eval.corpus import load_cases
from triage.eval.evaluate import Case, Guess, Outcome, evaluate
from triage.eval.releases import NOT_RECORDED, release_of
from triage.eval.render import render
from triage.kb.source import load_yaml

NEW, OLD, OLDER = "deepspeed 0.19.8, torch 2.13.0+cpu", "deepspeed 0.14.5, torch 2.5.1+cu124", "deepspeed 0.9.5, torch 2.0.1"
MISSING, ZERO = "missing_file", "zero_stage_mismatch"


def out(case_id, kind, expected, guess, release):
    guesses = (Guess("DS-X001", guess, 0.8),) if guess else ()
    return Outcome(Case(case_id, f"cases/{case_id}.log", kind, expected, None, None, release), guesses)


def outcomes():
    return [
        out("a", "failure", MISSING, MISSING, NEW),
        out("b", "failure", ZERO, MISSING, NEW),
        out("c", "silent", MISSING, MISSING, OLD),
        out("d", "failure", ZERO, ZERO, OLD),
        out("e", "clean", None, MISSING, OLD),
        out("f", "negative", "unknown", None, OLD),
        out("g", "failure", ZERO, None, OLDER),
        out("h", "failure", ZERO, ZERO, None),
    ]


def test_release_label_of_a_manifest_entry():
    assert release_of("0.14.5", "2.5.1+cu124") == OLD
    assert release_of(None, None) is None
    assert release_of("0.14.5", None) == "deepspeed 0.14.5, torch ?"


def test_tally_per_pair_in_release_order():
    data = evaluate(outcomes()).to_json()["accuracy"]["by_release"]
    # oldest DeepSpeed first (0.9.5 before 0.14.5 before 0.19.8: by number, not by text); unrecorded last
    assert list(data) == [OLDER, OLD, NEW, NOT_RECORDED]
    assert data[OLD] == {"cases": 2, "top1": 2, "top3": 2, "top1_rate": 1.0, "top3_rate": 1.0, "unknown": 0,
                         "negatives": 1, "negatives_diagnosed": 0, "clean": 1, "clean_fired": 1, "missed": []}
    assert (data[NEW]["cases"], data[NEW]["top1"], data[NEW]["missed"]) == (2, 1, ["b"])
    assert (data[OLDER]["top1"], data[OLDER]["unknown"], data[OLDER]["missed"]) == (0, 1, ["g"])


def test_no_release_section_when_no_case_records_one():
    plain = [Outcome(Case("x", "cases/x.log", "failure", ZERO), (Guess("DS-Z001", ZERO, 0.8),))]
    result = evaluate(plain)
    assert result.to_json()["accuracy"]["by_release"] == {}
    assert "per release pair" not in render(result, "corpus", 1)


def test_json_with_release_pairs_matches_the_schema():
    validate(evaluate(outcomes()).to_json(corpus="c", rule_set={"directory": "r", "count": 1, "digest": "d"}))


def test_human_output_has_one_row_per_pair():
    text = render(evaluate(outcomes()), "corpus", 3)
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("accuracy per release pair"))
    assert "top-1" in lines[head] and "clean fired" in lines[head] and "negatives diagnosed" in lines[head]
    rows = lines[head + 1:head + 5]
    assert [r.split("  ")[0] for r in rows] == [OLDER, OLD, NEW, NOT_RECORDED]
    assert "2 100.0%" in rows[1] and "1 of 1" in rows[1] and "0 of 1" in rows[1]


def test_load_cases_reads_the_releases_of_each_entry(tmp_path):
    write_corpus(tmp_path, [
        {"id": "a", "log": "cases/a.log", "kind": "failure", "expected_category": ZERO, "deepspeed": "0.14.5",
         "torch": "2.5.1+cu124"},
        {"id": "b", "log": "cases/b.log", "kind": "clean"},
    ], {"cases/a.log": "x\n", "cases/b.log": "y\n"})
    cases = load_cases(tmp_path)
    assert [c.release for c in cases] == [OLD, None]


def test_committed_corpus_groups_every_pair(cli):
    result = cli("eval", "--json")
    data = json.loads(result.stdout)
    by_release = data["accuracy"]["by_release"]
    manifest = load_yaml((CORPUS / "manifest.yaml").read_text())
    pairs = {release_of(e.get("deepspeed"), e.get("torch")) for e in manifest if e.get("log")}
    assert set(by_release) == pairs and len(pairs) >= 4
    assert sum(row["cases"] for row in by_release.values()) == data["accuracy"]["cases"]
    assert sum(row["clean"] for row in by_release.values()) == data["clean"]["cases"]


def fw(case_id, kind, expected, guess, framework):
    guesses = (Guess("DS-X001", guess, 0.8),) if guess else ()
    return Outcome(Case(case_id, f"cases/{case_id}.log", kind, expected, None, None, NEW, framework), guesses)


def test_tally_per_framework_direct_first_then_by_name():
    result = evaluate([
        fw("a", "failure", ZERO, ZERO, "transformers Trainer"),
        fw("b", "failure", ZERO, MISSING, "accelerate"),
        fw("c", "failure", MISSING, MISSING, None),
        fw("d", "clean", None, None, "accelerate"),
        fw("e", "negative", "unknown", None, "lightning"),
    ])
    data = result.to_json()["accuracy"]["by_framework"]
    assert list(data) == ["DeepSpeed directly", "accelerate", "lightning", "transformers Trainer"]
    assert (data["accelerate"]["cases"], data["accelerate"]["top1"], data["accelerate"]["missed"]) == (1, 0, ["b"])
    assert (data["accelerate"]["clean"], data["lightning"]["negatives"]) == (1, 1)
    assert data["transformers Trainer"]["top1_rate"] == 1.0
    text = render(result, "corpus", 1)
    assert "accuracy per framework" in text
    plain = evaluate([fw("x", "failure", ZERO, ZERO, None)])
    assert plain.to_json()["accuracy"]["by_framework"] == {} and "per framework" not in render(plain, "corpus", 1)


def test_a_case_framework_is_its_layouts_else_its_packages(tmp_path):
    write_corpus(tmp_path, [
        {"id": "a", "log": "cases/a.log", "kind": "failure", "expected_category": ZERO,
         "layout": {"stage": 2, "framework": "accelerate"}, "frameworks": {"accelerate": "1.15.0", "transformers": "5.18.0"}},
        {"id": "b", "log": "cases/b.log", "kind": "negative", "expected_category": "unknown", "frameworks": {"lightning": "2.6.6"}},
        {"id": "c", "log": "cases/c.log", "kind": "clean", "layout": {"stage": 2}},
    ], {"cases/a.log": "x\n", "cases/b.log": "y\n", "cases/c.log": "z\n"})
    assert [c.framework for c in load_cases(tmp_path)] == ["accelerate", "lightning", None]


def test_committed_corpus_shows_each_framework_beside_direct_loads(cli):
    data = json.loads(cli("eval", "--json").stdout)
    by_framework = data["accuracy"]["by_framework"]
    assert {"DeepSpeed directly", "accelerate", "transformers Trainer", "transformers + PEFT"} <= set(by_framework)
    assert sum(row["cases"] for row in by_framework.values()) == data["accuracy"]["cases"]
    assert sum(row["clean"] for row in by_framework.values()) == data["clean"]["cases"]


def test_the_yardstick_is_direct_loads_on_the_newest_pair_and_names_the_rows_below_it():
    def case(case_id, expected, guess, release, framework=None):
        guesses = (Guess("DS-X001", guess, 0.8),) if guess else ()
        return Outcome(Case(case_id, f"cases/{case_id}.log", "failure", expected, None, None, release, framework), guesses)

    result = evaluate([
        case("a", ZERO, ZERO, NEW), case("b", ZERO, MISSING, NEW),            # direct, newest: 1 of 2
        case("c", ZERO, ZERO, OLD), case("d", ZERO, ZERO, OLD),               # direct, older pair: 2 of 2
        case("e", ZERO, ZERO, NEW, "accelerate"), case("f", ZERO, None, NEW, "accelerate"),
        case("g", ZERO, None, NEW, "accelerate"),                             # accelerate: 1 of 3, below
        case("h", ZERO, ZERO, NEW, "transformers Trainer"),                   # 1 of 1
    ])
    data = result.to_json()["accuracy"]["direct_newest"]
    assert (data["release"], data["cases"], data["top1"]) == (NEW, 2, 1)
    line = next(line for line in render(result, "corpus", 1).splitlines() if line.startswith("yardstick:"))
    assert "on deepspeed 0.19.8" in line and "1 of 2 (50.0%)" in line
    # the newest pair's row (framework cases too: 3 of 6) equals the yardstick, so is not below it
    assert line.endswith("below it: accelerate 33.3%")


def test_committed_corpus_yardstick_counts_the_newest_pairs_direct_loads(cli):
    data = json.loads(cli("eval", "--json").stdout)["accuracy"]
    manifest = {e["id"]: e for e in load_yaml((CORPUS / "manifest.yaml").read_text())}
    newest = max({(e["deepspeed"], e["torch"]) for e in manifest.values() if e.get("deepspeed")},
                 key=lambda pair: tuple(int(n) for n in pair[0].split(".")))
    direct = [e for e in manifest.values() if e["kind"] in ("failure", "silent")
              and (e["deepspeed"], e["torch"]) == newest
              and not (e.get("layout") or {}).get("framework") and not e.get("frameworks")]
    yardstick = data["direct_newest"]
    assert yardstick["release"] == release_of(*newest) and yardstick["cases"] == len(direct) >= 100
    assert yardstick["top1"] == len(direct) - len(set(yardstick["missed"]))
    assert set(yardstick["missed"]) <= {e["id"] for e in direct}
