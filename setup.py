"""Bundle the data the installed tool needs into the wheel (everything else is in pyproject.toml).

The rules, the example logs they name and the JSON output schemas live at the repository's top
(rules/, corpus/, docs/schemas/), not inside the package. A wheel copies them under
triage/_bundled/ with the same layout, so rule examples resolve from the rules dir's parent as in
a checkout; triage/kb/index.py falls back to that copy when no checkout is around it.
"""

import shutil
from pathlib import Path

import yaml
from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


def bundled_files() -> list[str]:
    """Repository-relative paths: every rule file, its schema, every example file a rule names,
    and the JSON output schemas."""
    rules = sorted(p for p in (ROOT / "rules").rglob("*") if p.is_file() and p.suffix in (".yaml", ".json"))
    examples = set()
    for path in rules:
        if path.suffix == ".yaml":
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            examples |= {e["file"] for e in data.get("examples", []) if isinstance(e, dict) and "file" in e}
    schemas = sorted((ROOT / "docs" / "schemas").rglob("*.json"))  # with bundled/: self-contained copies
    return sorted({str(p.relative_to(ROOT)) for p in rules + schemas} | examples)


class BuildWithData(build_py):
    def run(self):
        super().run()
        target = Path(self.build_lib) / "triage" / "_bundled"
        for name in bundled_files():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / name, target / name)


setup(cmdclass={"build_py": BuildWithData})
