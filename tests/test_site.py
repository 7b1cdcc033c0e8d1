"""The docs build as a site: `mkdocs build --strict` (mkdocs.yml, mkdocs_hooks.py) with no warning.

Strict: a broken link, a missing anchor or a page named in the nav that does not exist fails
the build. mkdocs is a test dependency (pyproject.toml's `test` extra), never skipped.

Then a real browser reads the built pages: headless Chromium (`.ci/run` installs it; only where
it is absent does that test skip) loads each page that has a Mermaid diagram from disk, with no
network, and every diagram must have become a drawing: an <svg> in each `.mermaid` element, no
"Syntax error", none of the diagram's source left as text.
"""

import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

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
    assert '<div class="mermaid">flowchart TD' in page  # the bare source: a <code> inside is a syntax error to mermaid
    assert "js/mermaid-init.js" in page and (site / "js" / "mermaid-init.js").is_file()


def test_the_which_command_chart_names_real_commands(site):
    """The guide's "which command when" chart: a Mermaid block whose every `ds-triage X` exists."""
    from triage.cli import SUBCOMMANDS

    block = re.search(r"## Which command when\n+```mermaid\n(.*?)```", (ROOT / "docs" / "guide.md").read_text(), re.S)
    assert block, "docs/guide.md has no 'Which command when' chart"
    named = set(re.findall(r"ds-triage (\w+)", block.group(1)))
    assert {"classify", "triage", "probe", "repair", "verify", "stream"} <= named
    assert named <= set(SUBCOMMANDS)
    assert '<div class="mermaid">flowchart TD' in (site / "guide" / "index.html").read_text()


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


# Pages with a ```mermaid block, as (Markdown path under docs/, built page under the site).
DIAGRAM_PAGES = sorted(
    (md.relative_to(ROOT / "docs").as_posix(),
     "index.html" if md.name == "index.md" and md.parent == ROOT / "docs"
     else md.relative_to(ROOT / "docs").with_suffix("").as_posix() + "/index.html")
    for md in (ROOT / "docs").rglob("*.md") if "```mermaid" in md.read_text(encoding="utf-8"))
CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
# What a page loads from elsewhere: a script, an image, a stylesheet (not a canonical link or an <a>).
REMOTE = re.compile(r"""<(?:script|img)\b[^>]*\bsrc=["']?(?:https?:)?//"""
                    r"""|<link\b(?=[^>]*\brel=["']?(?:stylesheet|icon|preload|modulepreload))[^>]*\bhref=["']?(?:https?:)?//""", re.I)


def test_the_site_needs_no_network(site):
    """No page loads a script, stylesheet or image from elsewhere (a CDN): the docs read the same
    offline, diagrams included (mermaid.js is bundled under docs/js/, with its licence)."""
    remote = {page.relative_to(site).as_posix(): REMOTE.findall(page.read_text(encoding="utf-8"))
              for page in site.rglob("*.html")}
    assert not {page: found for page, found in remote.items() if found}
    assert (site / "js" / "mermaid.min.js").is_file() and (ROOT / "docs" / "js" / "mermaid.LICENSE").is_file()
    assert len(DIAGRAM_PAGES) >= 3, DIAGRAM_PAGES


class Diagrams(HTMLParser):
    """Each `.mermaid` element of a page as the browser left it: (has an <svg>, its text)."""

    VOID = {"br", "img", "hr", "input", "meta", "link", "area", "base", "col", "embed", "source", "track", "wbr"}

    def __init__(self):
        super().__init__()
        self.found: list[list] = []  # [has svg, text parts]
        self.depth = 0  # open elements inside the current .mermaid element; 0 outside one

    def handle_starttag(self, tag, attrs):
        if self.depth:
            self.found[-1][0] |= tag == "svg"
            self.depth += tag not in self.VOID
        elif "mermaid" in (dict(attrs).get("class") or "").split():
            self.found.append([False, []])
            self.depth = 1

    def handle_startendtag(self, tag, attrs):
        if self.depth:
            self.found[-1][0] |= tag == "svg"

    def handle_endtag(self, tag):
        if self.depth and tag not in self.VOID:
            self.depth -= 1

    def handle_data(self, data):
        if self.depth:
            self.found[-1][1].append(data)


def rendered(page: Path, profile: Path) -> str:
    """The page's DOM after headless Chromium ran its scripts (virtual time: no real waiting)."""
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={profile}",
         "--virtual-time-budget=20000", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=180)
    assert done.returncode == 0 and "</html>" in done.stdout, done.stderr[-2000:]
    return done.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs it: apt-get install chromium)")
@pytest.mark.parametrize("source, built", DIAGRAM_PAGES, ids=[md for md, _ in DIAGRAM_PAGES])
def test_every_diagram_renders_in_a_browser(site, source, built, tmp_path):
    """The diagrams as a reader sees them. Offline, a CDN's mermaid.js never loads and the source
    stays as text; a <code> inside the fence makes mermaid draw "Syntax error in text" instead."""
    text = (ROOT / "docs" / source).read_text(encoding="utf-8")
    blocks = re.findall(r"```mermaid\n(.*?)```", text, re.S)
    dom = rendered(site / built, tmp_path / "profile")
    parser = Diagrams()
    parser.feed(dom)
    assert len(parser.found) == len(blocks), f"{source}: {len(parser.found)} diagrams in the page, {len(blocks)} written"
    assert "Syntax error" not in dom, source
    for n, ((svg, parts), block) in enumerate(zip(parser.found, blocks)):
        shown = " ".join("".join(parts).split())
        first = block.strip().splitlines()[0].strip()  # "flowchart TD": only the source has it
        assert svg, f"{source} diagram {n + 1} was not drawn: {shown[:200]}"
        assert first not in shown and "-->" not in shown, f"{source} diagram {n + 1} shows its source: {shown[:200]}"


@pytest.mark.slow
def test_the_recorded_triage_session_is_what_triage_prints():
    """docs/sessions.md shows a real `triage` run, recorded in tmux; the same command on the same
    real checkpoint (the suite's ZeRO-3 baseline) prints it again, or the page is stale."""
    from tests import probe_checkpoints as pc

    block = re.search(r"```text\n\$ (ds-triage triage [^\n]*)\n(.*?)\n\$ echo \$\?\n(\d+)\n```",
                      (ROOT / "docs" / "sessions.md").read_text(encoding="utf-8"), re.S)
    assert block, "docs/sessions.md has no recorded `ds-triage triage` session"
    command, shown, code = block.groups()
    shown_ckpt = "/tmp/ds-demo/ckpt"  # where the recording's copy of the baseline was
    ckpt = str(pc.scenario(pc.ZERO3))
    args = [ckpt if arg == shown_ckpt else arg for arg in command.split()[1:]]
    done = subprocess.run([sys.executable, "-m", "triage", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, env=dict(os.environ, NO_COLOR="1", DS_ACCELERATOR="cpu"))
    printed = "\n".join(line.rstrip() for line in done.stdout.replace(ckpt, shown_ckpt).rstrip("\n").splitlines())
    assert (printed, done.returncode) == (shown, int(code)), (
        "docs/sessions.md's `triage` session is no longer what triage prints: record it again (a bash in tmux, "
        f"the baseline copied to {shown_ckpt}, `tmux capture-pane -p -J`)\n" + printed)


README = ROOT / "README.md"


def test_the_readme_example_output_is_what_its_command_prints():
    """The quick start's output is a real run: the command the README names prints it again."""
    found = re.search(r"`dev\.py demo` runs `(ds-triage classify [^`]+)`.*?```text\n(.*?)\n```",
                      README.read_text(encoding="utf-8"), re.S)
    assert found, "README.md: no quick start output after the command `dev.py demo` runs"
    command, shown = found.groups()
    done = subprocess.run([sys.executable, "-m", "triage", *command.split()[1:]], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, env=dict(os.environ, NO_COLOR="1"))
    assert done.returncode == 0 and done.stdout.rstrip("\n") == shown, (
        f"README.md's quick start output is stale: paste what `{command}` prints now\n{done.stdout}")
    import importlib.util

    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    assert dev.DEMO_LOG == ROOT / command.split()[-1], "the README names another log than dev.py demo runs"


def test_every_command_in_the_readme_exists_with_its_options():
    """Each `ds-triage SUB --option` the README shows is a subcommand with that option, and each
    `python3 dev.py X` is one dev.py takes."""
    from triage.cli import SUBCOMMANDS

    text = README.read_text(encoding="utf-8")
    shown = re.findall(r"^(?:[^#\n]*\| )?ds-triage (\w+)([^#\n]*)", "\n".join(
        block for block in re.findall(r"```sh\n(.*?)```", text, re.S)), re.M)
    assert len(shown) >= 10, shown
    helps: dict[tuple, str] = {}

    def usage(*words: str) -> str:  # `ds-triage rules lint --help`, else `ds-triage rules --help`
        for command in (words, words[:1]):
            if command not in helps:
                done = subprocess.run([sys.executable, "-m", "triage", *command, "--help"], capture_output=True,
                                      text=True, cwd=ROOT, timeout=60)
                helps[command] = done.stdout if done.returncode == 0 else ""
            if helps[command]:
                return helps[command]
        return ""

    for sub, rest in shown:
        assert sub in SUBCOMMANDS, sub
        action = re.match(r"\s+([a-z][\w-]*)\b(?![/.])", rest)
        text = usage(sub, *([action.group(1)] if action else []))
        for option in re.findall(r"(?<![\w-])(--[\w-]+|-[A-Za-z])\b", rest):
            assert re.search(rf"(?<![\w-]){re.escape(option)}\b", text), f"ds-triage {sub} has no {option}"
    dev = subprocess.run([sys.executable, str(ROOT / "dev.py")], capture_output=True, text=True, timeout=60)
    for what in re.findall(r"^python3 dev\.py (\w+)", text, re.M):
        assert f"python3 dev.py {what}" in dev.stderr, what  # dev.py's usage lists what it takes


# docs/layouts.md's file trees, each drawn from a real save: (heading, the checkpoint root that holds it)
LAYOUT_PICTURES = (("ZeRO stage 0, 1 or 2", "layout", "z2-dp2-fp32"), ("ZeRO-3", "layout", "z3-dp2-fp32"),
                   ("Universal checkpoint", "scenario", "resume-universal-z2-dp2-fp32-on-dp1"))


@pytest.mark.slow
@pytest.mark.parametrize("heading, kind, name", LAYOUT_PICTURES, ids=[h for h, _, _ in LAYOUT_PICTURES])
def test_the_layout_pictures_name_the_files_real_saves_hold(heading, kind, name):
    """Every file and folder a tree in docs/layouts.md names is in the real checkpoint it was drawn
    from (the suite's DeepSpeed baselines; the universal one made by ds_to_universal from the
    stage-2 one), and what it says is not there ("no ...") is not."""
    from tests import probe_checkpoints as pc

    text = (ROOT / "docs" / "layouts.md").read_text(encoding="utf-8")
    block = re.search(rf"^## {re.escape(heading)}\n.*?```mermaid\n(.*?)```", text, re.S | re.M)
    assert block, heading
    root = pc.layout_base(name) if kind == "layout" else pc.scenario(name)
    real = {path.name for path in root.rglob("*")}
    absent = set(re.findall(r'"no ([\w.]+)"', block.group(1)))
    named = set(re.findall(r"[\w.]+\.(?:pt|py)\b|\bglobal_step\w+|\blatest\w*|\b[\w.]+\.(?:weight|bias)\b",
                           block.group(1))) - absent
    assert len(named) >= 5 and named <= real, sorted(named - real)
    assert not absent & real, absent & real
