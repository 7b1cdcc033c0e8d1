"""`ds-triage runbook`: exit codes, the JSON contract, the page, one source for terminal and docs."""

import json
import re
import subprocess
import sys

import jsonschema
import pytest

from tests.conftest import ROOT
from triage.kb import readable
from triage.runbook import search as runbook
from triage.cli import main
from triage.runbook.docgen import rule_sources
from triage.runbook.rule_docs import rule_page
from triage.runbook.render import render_page
from triage.classify.example_lines import example_error
from triage.runbook.sections import DOCS_SECTIONS, TERMINAL_SECTIONS

SCHEMA = json.loads((ROOT / "docs" / "schemas" / "runbook.schema.json").read_text())
jsonschema.validators.validator_for(SCHEMA).check_schema(SCHEMA)
VALIDATOR = jsonschema.validators.validator_for(SCHEMA)(SCHEMA)  # the schema checked once, not per page


@pytest.fixture
def run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("NO_COLOR", "1")

    def call(*args):
        code = main(["runbook", *args])
        out, err = capsys.readouterr()
        return code, out, err

    return call


@pytest.mark.parametrize("args, kind", [
    (["size", "mismatch"], "fuzzy"), (["DS-Z001"], "id"), (["zero_stage_mismatch"], "category"),
    (["banana smoothie recipe"], "none"), (["--list"], "list"),
])
def test_json_matches_its_schema(run, args, kind):
    code, out, _ = run(*args, "--json")
    data = json.loads(out)
    VALIDATOR.validate(data)
    assert data["kind"] == kind
    assert code == (1 if kind == "none" else 0)
    if kind in ("id", "category", "fuzzy"):
        assert data["page"]["id"] == data["results"][0]["id"]
        assert data["page"]["example"]["lines"], "every rule's first positive example yields its error lines"


def test_every_rule_page_json_matches_the_schema(run, rules):
    for rule in rules.rules:
        code, out, _ = run(rule.id, "--json")
        data = json.loads(out)
        VALIDATOR.validate(data)
        assert code == 0 and data["page"]["id"] == rule.id


def test_list_names_every_rule_once_by_category(run, rules):
    code, out, _ = run("--list")
    assert code == 0
    ids = re.findall(r"^  (DS-[A-Z]\d{3}) ", out, re.M)
    assert sorted(ids) == sorted(r.id for r in rules.rules)
    headings = re.findall(r"^([a-z_]+) \((\d+)\)$", out, re.M)
    assert [h for h, _ in headings] == sorted({r.category for r in rules.rules})


def test_found_page_has_the_runbook_sections_and_others(run):
    code, out, _ = run("size", "mismatch")
    assert code == 0
    assert out.startswith("DS-M001  ")
    headings = re.findall(r"^([A-Z][A-Z ]+)$", out, re.M)
    # no docs site configured: the whole page, signature and examples included
    assert headings == [name.upper() for name in DOCS_SECTIONS if name != "Affected releases"]  # not a known bug
    assert "Example, from corpus/" in out
    others = out.split("Also matching (score 0-100):", 1)[1]
    assert re.search(r"^  DS-M004  100  ", others, re.M)


def test_no_good_match_says_so_and_suggests_list(run):
    code, out, err = run("qwzx")
    assert code == 1
    assert out.startswith("No good match for 'qwzx'.")
    assert "ds-triage runbook --list" in out
    assert len(re.findall(r"^  DS-[A-Z]\d{3} +\d+  ", out, re.M)) >= 3, "the closest rules are shown"


@pytest.mark.parametrize("args", [[], ["--list", "latest"], ["--json"]])
def test_usage_errors_exit_2(run, args):
    code, out, err = run(*args)
    assert code == 2 and not out
    assert err.startswith("ds-triage: error: ")


def test_unknown_option_exits_2(run):
    with pytest.raises(SystemExit) as exit:
        run("--nope")
    assert exit.value.code == 2


def _plain(text: str) -> str:
    """Markdown or terminal text reduced to its characters: no markup, no layout."""
    text = re.sub(r"\[([^\[\]\n]+)\]\([^)\s]+\)", r"\1", text)  # [text](link)
    text = re.sub(r"<(https://[^>]+)>", r"\1", text)
    text = re.sub(r"^\s*```\w*$", "", text, flags=re.M)
    text = re.sub(r"^\s*(?:\d+\.|-) ", "", text, flags=re.M)
    text = text.replace("`", "").replace("**", "")
    return "".join(text.split())  # no spaces at all: Markdown pads a code span that holds a backtick


def test_terminal_and_docs_pages_show_the_same_sections(rules):
    """One source: every section the terminal shows says the same words in the docs page."""
    root = rules.directory.parent
    sources = rule_sources(rules)
    for rule in rules.rules:
        example = example_error(rule, root)
        source = sources[rule.id].relative_to(root).as_posix()
        terminal = render_page(rule, source, example, width=10_000, whole=False)
        docs = rule_page(rule, source, lambda path: path, example)
        term_sections = dict(re.findall(r"^([A-Z][A-Z ]+)\n(.*?)(?=^[A-Z][A-Z ]+\n|^Full page)", terminal, re.M | re.S))
        docs_sections = dict(re.findall(r"^## (.+?)\n(.*?)(?=^## |\Z)", docs, re.M | re.S))
        assert {n.upper() for n in TERMINAL_SECTIONS if n in docs_sections} == set(term_sections), rule.id
        for name in TERMINAL_SECTIONS:
            if name in docs_sections:  # "Affected releases": known bugs only, in both
                assert _plain(term_sections[name.upper()]) == _plain(docs_sections[name]), (rule.id, name)


def test_runbook_imports_neither_torch_nor_deepspeed(tmp_path):
    code = ("import sys; from triage.cli import main; main(['runbook', 'size mismatch']); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'deepspeed')), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(tmp_path), "NO_COLOR": "1"})
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]"


def test_cli_runs_as_a_subprocess(cli):
    done = cli("runbook", "PytorchStreamReader")
    assert done.returncode == 0 and done.stdout.startswith(b"DS-X001  ")


def test_regexes_read_as_text():
    assert readable.texts(r"^Error\(s\) in loading state_dict for [\w.]+:") == ["Error(s) in loading state_dict for ..."]
    assert readable.texts(r"(Missing|Unexpected) key\(s\)") == ["Missing key(s)", "Unexpected key(s)"]
    assert readable.texts(r"checkpoint count \d+ is different") == ["checkpoint count N is different"]
    assert readable.texts(r"(bf16_)?zero_pp_rank_\d+") == ["bf16_zero_pp_rank_N", "zero_pp_rank_N"]
    assert readable.texts(r"^$") == [] and readable.texts(r"(?!.*Child).+") == []
    assert readable.exception_names(r"(?:_pickle\.|pickle\.)?UnpicklingError") == ["UnpicklingError"]
    assert readable.exception_names(r"TypeError|AttributeError") == ["TypeError", "AttributeError"]


def test_normalize_makes_spellings_equal():
    assert runbook.normalize("weights_only=True") == runbook.normalize("Weights only true")
    assert runbook.normalize("Missing key(s)") == "missing keys"
    assert runbook.field_score("dp world size", "used a dp world size of n") == 100
    assert runbook.field_score("killed 9", "a rank was killed by sigkill exit code 9") == 95
    assert runbook.field_score("pytorchstreamreadr", "pytorchstreamreader failed") < 95


def test_a_query_inside_a_longer_identifier_scores_below_the_word_itself():
    def score(q, original):
        return runbook.field_score(runbook.normalize(q), runbook.normalize(original), original=original)

    assert score("latest", "hides latest_universal inside it") == 97  # another file's name
    assert score("latest", "reads `latest` and latest_universal") == 100  # the word itself is there too
    assert score("weights only", "torch.load(weights_only=True)") == 100  # the query spelled as words
    assert score("load universal", "checkpoint.load_universal true") == 100
