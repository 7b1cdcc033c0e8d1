"""Older DeepSpeed / torch release pairs in the corpus (issue 18, point 2): the generator's
--deepspeed/--torch handling and the committed cases of each pair. Builds no venv and runs nothing:
the pairs' logs were generated once (corpus/NOTES.md) and are read as stored."""

import re

import pytest
from triage.kb.source import load_yaml

from corpus import generate, releases
from corpus.scenarios import SCENARIOS
from tests.conftest import CORPUS

MANIFEST = load_yaml((CORPUS / "manifest.yaml").read_text())
PAIR_ENTRIES = [e for e in MANIFEST if "@" in e["id"]]
PAIRS = sorted({e["id"].split("@")[1] for e in PAIR_ENTRIES}, key=releases.pair_order)


@pytest.fixture
def pair():
    generate.PAIR["name"] = releases.pair_name("0.14.5", "2.5.1")
    yield generate.PAIR["name"]
    generate.PAIR["name"] = None


# --- the generator's arguments ----------------------------------------------------------

def test_deepspeed_and_torch_go_together(capsys):
    for argv in (["--deepspeed", "0.14.5"], ["--torch", "2.5.1"]):
        with pytest.raises(SystemExit) as exc:
            generate.parse(argv)
        assert exc.value.code == 2
        assert "--deepspeed and --torch go together" in capsys.readouterr().err
    args = generate.parse(["--deepspeed", "0.14.5", "--torch", "2.5.1", "--list"])
    assert (args.deepspeed, args.torch, args.list) == ("0.14.5", "2.5.1", True)
    assert generate.parse([]).deepspeed is None


@pytest.mark.parametrize("flag,bad", [("--deepspeed", "latest"), ("--deepspeed", "0.14.5; rm -rf /"),
                                      ("--deepspeed", "./wheels/x.whl"), ("--torch", "2"), ("--torch", "2.5.1.0"),
                                      ("--torch", "2.5.1+cu124"), ("--torch", "")])
def test_a_release_is_a_plain_version_number(flag, bad, capsys):
    argv = {"--deepspeed": "0.14.5", "--torch": "2.5.1"}
    argv[flag] = bad
    with pytest.raises(SystemExit):
        generate.parse([a for item in argv.items() for a in item])
    assert "is not a release number" in capsys.readouterr().err


def test_a_pair_runs_the_release_matrix_by_default_and_only_narrows_it():
    ids = [s["id"] for s in generate.select(None, pair=True)]
    assert set(ids) == set(releases.MATRIX) and len(ids) == len(releases.MATRIX)
    assert [s["id"] for s in generate.select(["zero2-dp1-latest-*"], pair=True)] == \
        [s["id"] for s in generate.select(["zero2-dp1-latest-*"])]
    assert len(generate.select(None)) == len([s for s in SCENARIOS if not s.get("pair")])


def test_a_scenario_of_one_pair_runs_only_there():
    bound = [s for s in SCENARIOS if s.get("pair")]
    assert bound, "the 0.15.4 + torch 2.6 import failure is bound to its pair"
    for s in bound:
        assert s not in generate.select(None) and s not in generate.select([s["id"]])
        assert s not in generate.select(None, pair=True)
        assert s in generate.select(None, s["pair"]) and s in generate.select([s["id"]], s["pair"])
        assert s not in generate.select([s["id"]], "ds0.0.1-torch0.0.1")


def test_every_matrix_scenario_exists_and_needs_no_framework():
    table = {s["id"]: s for s in SCENARIOS}
    assert not [i for i in releases.MATRIX if i not in table]
    for i in releases.MATRIX:
        layout = generate.L.LAYOUTS.get(table[i].get("layout"), {})
        assert not layout.get("worker") and not layout.get("tp") and not layout.get("pipe"), i


def test_a_pair_names_its_cases_logs_and_venv(pair, tmp_path):
    assert pair == "ds0.14.5-torch2.5.1"
    assert generate.entry_id("zero2-dp1-latest-deleted") == "zero2-dp1-latest-deleted@ds0.14.5-torch2.5.1"
    assert generate.log_rel("zero2-dp1-latest-deleted", "silent") == \
        "releases/ds0.14.5-torch2.5.1/cases/zero2-dp1-latest-deleted.log"
    assert generate.log_rel("train-z2-dp2-fp32", "clean") == "releases/ds0.14.5-torch2.5.1/clean/train-z2-dp2-fp32.log"
    assert releases.venv_dir("0.14.5", "2.5.1", tmp_path) == tmp_path / "ds0.14.5-torch2.5.1"


def test_without_a_pair_nothing_changes():
    assert generate.entry_id("zero2-dp1-latest-deleted") == "zero2-dp1-latest-deleted"
    assert generate.log_rel("train-z2-dp2-fp32", "clean") == "clean/train-z2-dp2-fp32.log"
    assert generate.table() is SCENARIOS


def test_install_steps_put_torch_first_and_pin_what_old_releases_need():
    steps = releases.requirements("0.14.5", "2.5.1")
    assert steps[0][0] == "torch==2.5.1" and steps[1][:2] == ["--no-build-isolation", "deepspeed==0.14.5"]
    assert "numpy<2" in releases.requirements("0.14.5", "2.2.2")[0]
    assert "numpy<2" not in steps[0]
    assert "pydantic<2" in releases.requirements("0.13.5", "2.1.2")[1]


def test_an_existing_venv_is_reused_without_building(tmp_path):
    root = releases.venv_dir("0.14.5", "2.5.1", tmp_path)
    root.mkdir(parents=True)
    (root / ".complete").write_text("built\n")
    said = []
    assert releases.ensure_venv("0.14.5", "2.5.1", said.append, tmp_path) == root
    assert said == []


def test_manifest_keeps_pair_entries_after_the_main_ones_in_release_order(tmp_path):
    one = SCENARIOS[0]["id"]
    entries = [{"id": f"{one}@ds0.16.9-torch2.6.0", "log": "a"}, {"id": f"{one}@ds0.14.5-torch2.5.1", "log": "b"},
               {"id": one, "log": "c"}, {"id": f"{one}@ds0.15.4-torch2.6.0", "log": "d"}]
    generate.write_manifest(tmp_path, entries)
    written = load_yaml((tmp_path / "manifest.yaml").read_text())
    assert [e["log"] for e in written] == ["c", "b", "d", "a"]


def test_expected_rule_of_a_pair_case_falls_back_to_the_scenarios():
    labels = load_yaml((CORPUS.parent / "corpus" / "expected_rules.yaml").read_text())
    assert generate.expected_rule("zero2-dp1-latest-deleted@ds0.14.5-torch2.5.1") == labels["zero2-dp1-latest-deleted"]


# --- the committed cases of each pair ----------------------------------------------------

def test_at_least_three_older_pairs_on_both_sides_of_torch_2_6():
    assert len(PAIRS) >= 3, PAIRS
    torches = {releases._v(p.split("-torch")[1]) for p in PAIRS}
    assert min(torches) < (2, 6) <= max(torches)
    assert all(releases._v(p.removeprefix("ds").split("-")[0]) < (0, 17) for p in PAIRS)


@pytest.mark.parametrize("entry", PAIR_ENTRIES, ids=[e["id"] for e in PAIR_ENTRIES])
def test_a_pair_case_is_stored_under_its_pair_and_records_the_releases_it_ran(entry):
    scenario, pair = entry["id"].split("@")
    ds, torch = re.fullmatch(r"ds([\d.]+)-torch([\d.]+)", pair).groups()
    assert entry["log"] == f"releases/{pair}/{'clean' if entry['kind'] == 'clean' else 'cases'}/{scenario}.log"
    assert (CORPUS / entry["log"]).is_file() and (CORPUS / entry["log"]).stat().st_size > 0
    assert entry["deepspeed"] == ds and entry["torch"].split("+")[0] == torch
    assert f"/venvs/{pair}/" not in entry["command"]   # shown as a user types it
    if entry["kind"] in ("failure", "silent"):
        assert entry["expected_category"]


def test_no_stray_pair_logs():
    listed = {e["log"] for e in PAIR_ENTRIES}
    on_disk = {p.relative_to(CORPUS).as_posix() for p in (CORPUS / releases.RELEASES_DIR).glob("*/*/*.log")}
    assert on_disk == listed


def test_reindex_refreshes_a_pair_case_from_the_table_and_drops_one_whose_log_is_gone(pair, tmp_path):
    table = {s["id"]: s for s in SCENARIOS}
    kept, gone = table["zero2-dp1-latest-deleted"], table["zero2-dp2-optim-shard-deleted"]
    log = tmp_path / generate.log_rel(kept["id"], "silent")
    log.parent.mkdir(parents=True)
    log.write_text("[WARNING] [engine.py:2796:load_checkpoint] Unable to find latest file at /x/latest\n")
    generate.write_manifest(tmp_path, [
        {"id": generate.entry_id(kept["id"]), "log": generate.log_rel(kept["id"], "silent"), "exit_code": 0},
        {"id": generate.entry_id(gone["id"]), "log": generate.log_rel(gone["id"], "failure"), "exit_code": 1}])
    generate.reindex(tmp_path, [kept, gone])
    written = load_yaml((tmp_path / "manifest.yaml").read_text())
    assert [e["id"] for e in written] == [f"zero2-dp1-latest-deleted@{pair}"]
    assert written[0]["kind"] == "silent" and written[0]["expected_category"] == "missing_file"
    assert "Unable to find latest file" in written[0]["what_happened"]


def test_a_captured_case_of_a_pair_is_indexed_under_its_pair(tmp_path):
    sc = next(s for s in SCENARIOS if s.get("pair") and s.get("captured"))
    generate.PAIR["name"] = sc["pair"]
    try:
        log = tmp_path / sc["captured"]["log"]
        log.parent.mkdir(parents=True)
        log.write_text("RuntimeError: 0 active drivers ([]). There should only be one.\n")
        generate.write_manifest(tmp_path, [])
        generate.reindex(tmp_path, [sc])
    finally:
        generate.PAIR["name"] = None
    written = load_yaml((tmp_path / "manifest.yaml").read_text())
    assert [e["id"] for e in written] == [f"{sc['id']}@{sc['pair']}"]
    assert written[0]["log"] == sc["captured"]["log"] == f"releases/{sc['pair']}/cases/{sc['id']}.log"
    assert written[0]["kind"] == "negative" and written[0]["exit_code"] == 1


def test_missing_skips_what_a_pair_has_generated_already(pair, tmp_path):
    table = {s["id"]: s for s in SCENARIOS}
    done, gone, other = (table[i] for i in ("zero2-dp1-latest-deleted", "zero2-dp2-optim-shard-deleted",
                                            "zero2-dp1-model-renamed"))
    log = tmp_path / generate.log_rel(done["id"], "silent")
    log.parent.mkdir(parents=True)
    log.write_text("x\n")
    generate.write_manifest(tmp_path, [
        {"id": generate.entry_id(done["id"]), "log": generate.log_rel(done["id"], "silent")},
        {"id": generate.entry_id(gone["id"]), "log": generate.log_rel(gone["id"], "failure")},   # log not on disk
        {"id": other["id"], "log": generate.log_rel(done["id"], "silent")}])                      # the main corpus's
    assert [generate.generated(tmp_path, s) for s in (done, gone, other)] == [True, False, False]
    assert generate.parse(["--deepspeed", "0.14.5", "--torch", "2.5.1", "--missing"]).missing
