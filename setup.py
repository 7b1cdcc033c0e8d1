"""Bundle the data the installed tool needs into the wheel (everything else is in pyproject.toml).

The rules, the example logs they name, the labelled corpus `ds-triage eval` measures them on (its
manifests and logs, not its checkpoints or generator), the JSON output schemas and the docs pages
the help texts name live at the repository's top (rules/, corpus/, docs/), not inside the package. A wheel copies them under
triage/_bundled/ with the same layout, so rule examples resolve from the rules dir's parent as in
a checkout; triage/kb/index.py falls back to that copy when no checkout is around it.
"""

import shutil
from pathlib import Path

import yaml
from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


# `ds-triage eval` from a wheel: the manifests and the logs they label (~8 MB, ~1.5 MB in the wheel)
CORPUS_SETS = ("cases", "clean", "releases", "field")


def bundled_files() -> list[str]:
    """Repository-relative paths: every rule file, its schema, every example file a rule names,
    the corpus's manifests and logs, the JSON output schemas and the docs' Markdown pages."""
    rules = sorted(p for p in (ROOT / "rules").rglob("*") if p.is_file() and p.suffix in (".yaml", ".json"))
    examples = set()
    for path in rules:
        if path.suffix == ".yaml":
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            examples |= {e["file"] for e in data.get("examples", []) if isinstance(e, dict) and "file" in e}
    schemas = sorted((ROOT / "docs" / "schemas").rglob("*.json"))  # with bundled/: self-contained copies
    pages = sorted((ROOT / "docs").rglob("*.md"))
    corpus = [ROOT / "corpus" / "manifest.yaml"] + sorted(
        p for name in CORPUS_SETS for p in (ROOT / "corpus" / name).rglob("*")
        if p.is_file() and p.suffix in (".log", ".yaml", ".md"))
    return sorted({str(p.relative_to(ROOT)) for p in rules + schemas + pages + corpus} | examples)


class BuildWithData(build_py):
    def run(self):
        super().run()
        target = Path(self.build_lib) / "triage" / "_bundled"
        for name in bundled_files():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / name, target / name)


setup(cmdclass={"build_py": BuildWithData})
