"""The docs build as a site: `mkdocs build --strict` (mkdocs.yml, mkdocs_hooks.py) with no warning.

Strict: a broken link, a missing anchor or a page named in the nav that does not exist fails
the build. mkdocs is a test dependency (pyproject.toml's `test` extra), never skipped.
"""

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

DOCS_URL = "https://docs.example.org/ds-triage/"  # where a team would publish the site


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(site)],
        capture_output=True, text=True, cwd=ROOT, timeout=300, env=dict(os.environ, DS_TRIAGE_DOCS_URL=DOCS_URL),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return site


def test_mkdocs_build_strict(site):
    for page in ("index.html", "guide/index.html", "architecture/index.html", "exit-codes/index.html",
                 "rules/index.html", "rules/errors/index.html", "rules/DS-Z001/index.html", "load-sites/index.html",
                 "reference/index.html", "reference/stream/index.html"):
        assert (site / page).is_file(), page
    # Links from the docs to repository files (rule YAML, corpus logs) resolve in the site too.
    z001 = (site / "rules" / "DS-Z001" / "index.html").read_text()
    assert 'href="../../repo/rules/zero_stage_mismatch/DS-Z001-' in z001
    assert next((site / "repo" / "rules" / "zero_stage_mismatch").glob("DS-Z001-*.yaml"))
    assert (site / "schemas" / "runbook.schema.json").is_file()
    # The schema pages link each other's sections and the schema files they are generated from.
    verify = (site / "reference" / "verify" / "index.html").read_text()
    assert 'href="../probe/#checkpoint"' in verify and 'href="../../schemas/verify.schema.json"' in verify


def test_architecture_diagram_is_mermaid_naming_real_packages(site):
    """The flow diagram is a Mermaid block (drawn by GitHub and by the site's mermaid.js) whose
    boxes name packages that exist, so a move that renames one leaves the picture wrong loudly."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = re.search(r"```mermaid\n(.*?)```", text, re.S)
    assert block, "docs/architecture.md has no mermaid block"
    named = set(re.findall(r"triage/(\w+)", block.group(1)))
    assert {"logs", "classify", "kb", "probe", "repair"} <= named
    for package in named:
        assert (ROOT / "triage" / package / "__init__.py").is_file(), package
    page = (site / "architecture" / "index.html").read_text()
    assert '<pre class="mermaid"><code>flowchart TD' in page
    assert "js/mermaid-init.js" in page and (site / "js" / "mermaid-init.js").is_file()


def test_the_which_command_chart_names_real_commands(site):
    """The guide's "which command when" chart: a Mermaid block whose every `ds-triage X` exists."""
    from triage.cli import SUBCOMMANDS

    block = re.search(r"## Which command when\n+```mermaid\n(.*?)```", (ROOT / "docs" / "guide.md").read_text(), re.S)
    assert block, "docs/guide.md has no 'Which command when' chart"
    named = set(re.findall(r"ds-triage (\w+)", block.group(1)))
    assert {"classify", "triage", "probe", "repair", "verify", "stream"} <= named
    assert named <= set(SUBCOMMANDS)
    assert '<pre class="mermaid"><code>flowchart TD' in (site / "guide" / "index.html").read_text()


def test_every_runbook_url_is_its_rules_page_in_the_site(site, rules, monkeypatch):
    """classify's runbook_url, with the site published at DOCS_URL, is the canonical URL mkdocs
    gives the rule's page: an alert that carries it links to the page that exists."""
    from triage.runbook import links

    monkeypatch.setenv(links.ENV, DOCS_URL.rstrip("/"))
    for rule in rules.rules:
        url = links.runbook_url(rule.id)
        page = site / url.removeprefix(DOCS_URL) / "index.html"
        assert f'<link rel="canonical" href="{url}">' in page.read_text(), rule.id
    monkeypatch.delenv(links.ENV)
    assert links.runbook_url("DS-Z001") is None
