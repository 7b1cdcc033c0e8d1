"""The docs generated from the rules (docs/rules/, docs/load-sites.md) are fresh and complete."""

import re

import pytest

from tests.conftest import ROOT
from triage.runbook import docgen
from triage.cli import main
from triage.kb.index import RuleSet
from triage.runbook.rule_docs import SECTIONS, code, describe_conditions

DOCS = ROOT / "docs"
REGENERATE = "docs are stale: run `ds-triage rules docs`"


@pytest.fixture(scope="module")
def generated(rules, load_sites):
    sites, versions = load_sites
    return docgen.generate(rules, DOCS, sites, versions)


def test_generated_docs_are_fresh(generated):
    problems = docgen.stale(DOCS, generated)
    assert not problems, REGENERATE + "\n" + "\n".join(f"  {p}" for p in problems)


def test_every_rule_has_its_page(rules):
    index = (DOCS / "rules" / "index.md").read_text() if (DOCS / "rules" / "index.md").is_file() else ""
    missing = [r.id for r in rules.rules if not (DOCS / "rules" / f"{r.id}.md").is_file()]
    unlisted = [r.id for r in rules.rules if f"]({r.id}.md)" not in index]
    assert not missing and not unlisted, f"{REGENERATE}\n  no page: {missing}\n  not in index.md: {unlisted}"


def test_pages_have_the_fixed_sections_in_order(generated, rules):
    for rule in rules.rules:
        text = generated[f"rules/{rule.id}.md"]
        # "Affected releases" is on the pages of known bugs only, with their affected and fixed releases
        expected = [s for s in SECTIONS if s != "Affected releases" or rule.category == "known_bug"]
        headings = re.findall(r"^## (.+)$", text, re.M)
        assert headings == expected, rule.id
        # what the person on call acts on first, the regexes that match it last
        assert headings[:4] == ["What it means", "Symptoms", "How to verify", "Fix"] and headings[-1] == "Signature"
        if rule.category == "known_bug":
            releases = text.split("## Affected releases", 1)[1].split("\n## ", 1)[0]
            for package, entry in rule.data["releases"].items():
                if package != "decided_by":
                    fixed = f"fixed in `{entry['fixed']}`" if entry["fixed"] else "no fixed release yet"
                    assert f"**{package}**: affected `{entry['affected']}`; {fixed}" in releases, rule.id
        assert text.splitlines()[2] == f"# {rule.id}: {rule.title}"


def test_generation_is_deterministic(generated, rules, load_sites):
    sites, versions = load_sites
    shuffled = RuleSet(list(reversed(rules.rules)), rules.directory, rules.digest)
    assert docgen.generate(shuffled, DOCS, list(reversed(sites)), dict(reversed(list(versions.items())))) == generated


def test_load_sites_page_counts_and_names_rules(generated, load_sites, rules):
    sites, _ = load_sites
    page = generated["load-sites.md"]
    assert re.search(rf"^{len(sites)} sites: \d+ covered, \d+ uncovered\.$", page, re.M)
    rows = [line for line in page.splitlines() if re.match(r"^\| \d+ \|", line)]
    assert len(rows) == len(sites)
    for rule in rules.rules:
        for reference in rule.data["references"]:
            if reference.get("source") == "deepspeed/runtime/state_dict_factory.py" \
                    and reference.get("function") == "SDLoaderBase.check_ckpt_list":
                assert f"[{rule.id}](rules/{rule.id}.md)" in page


def test_code_spans_survive_backticks_and_tables():
    assert code("a`b") == "`` a`b ``"
    assert code("plain") == "`plain`"
    assert code("x\ny") == "`x\\ny`"


def test_conditions_read_as_sentences():
    parts = describe_conditions({
        "exception": "AssertionError", "message": "^$", "ranks": "some", "exit_code": -9, "no_traceback": True,
        "frame": {"file": "runtime/state_dict_factory.py", "function": "check_ckpt_list", "code": "len"},
        "line": "Unable to find latest",
    })
    assert parts == [
        "the exception type is `AssertionError`",
        "its message is empty (a bare `assert` or `raise`)",
        "its traceback passes through a frame with file `runtime/state_dict_factory.py`, function `check_ckpt_list`, "
        "source line matching `len`",
        "it was raised on some but not all of the log's ranks",
        "a log line contains a match for `Unable to find latest`",
        "a rank or the launcher exited with code -9 (SIGKILL, often the OOM killer)",
        "the log holds no Python traceback",
    ]


def test_cli_writes_then_checks_then_finds_staleness(tmp_path, capsys, monkeypatch, generated):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(docgen, "load_sites", lambda: ([], {}))  # the site parse is covered above
    out = tmp_path / "docs"
    index = ROOT / "rules" / "load-site-messages.json"
    before = index.read_bytes()
    assert main(["rules", "docs", "--out", str(out)]) == 0
    assert (out / "rules" / "index.md").is_file() and (out / "load-sites.md").is_file()
    # the message index of these (no) sites goes with --out; the rules' own is not touched
    assert (out / "load-site-messages.json").is_file() and index.read_bytes() == before
    assert main(["rules", "docs", "--out", str(out), "--check"]) == 0
    capsys.readouterr()

    page = next((out / "rules").glob("DS-*.md"))
    page.write_text(page.read_text() + "hand edit\n")
    (out / "rules" / "DS-X999.md").write_text("a page of a rule that is gone\n")
    assert main(["rules", "docs", "--out", str(out), "--check"]) == 1
    err = capsys.readouterr().err
    assert f"changed {page}" in err and f"extra {out / 'rules' / 'DS-X999.md'}" in err
    assert err.rstrip().splitlines()[-1] == f"ds-triage: {REGENERATE}"

    assert main(["rules", "docs", "--out", str(out)]) == 0
    assert not (out / "rules" / "DS-X999.md").exists()
    assert main(["rules", "docs", "--out", str(out), "--check"]) == 0


def test_missing_site_source_is_a_clear_error(monkeypatch, capsys, tmp_path):
    import triage.kb.sites

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def not_installed(*args, **kwargs):
        raise ModuleNotFoundError("package 'deepspeed' is not installed")

    monkeypatch.setattr(triage.kb.sites, "load_path_sites", not_installed)
    assert main(["rules", "docs", "--out", str(tmp_path / "docs")]) == 3
    err = capsys.readouterr().err
    assert "package 'deepspeed' is not installed" in err and len(err.strip().splitlines()) == 1


def test_every_exit_code_is_documented():
    """Each EXIT_* of triage/errors.py (timeout 6 and interrupted 130 among them) has its row in docs/exit-codes.md."""
    from triage import errors

    text = (ROOT / "docs" / "exit-codes.md").read_text()
    documented = {int(code) for code in re.findall(r"^\| (\d+) \| ", text, re.M)}
    codes = {value for name, value in vars(errors).items() if name.startswith("EXIT_")}
    assert codes and codes <= documented, sorted(codes - documented)


def _table_rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.strip().startswith("| ") and not line.strip().startswith(("| project", "|---"))]


def test_the_readmes_coverage_is_the_newest_release_of_each_project_in_load_sites():
    """README's per-project coverage (issue 42, item 6) is the generated page's, never a stale copy."""
    page = (ROOT / "docs" / "load-sites.md").read_text()
    per_release = _table_rows(page.split("## Coverage per project and release")[1].split("\n## ")[0])
    newest = {row[0]: row for row in per_release}  # the page lists each project's releases oldest first
    readme = (ROOT / "README.md").read_text()
    shown = _table_rows(readme.split("| project | newest release read |")[1].split("\n\n")[0])
    assert shown == list(newest.values())
