"""mkdocs hooks: serve the repository files the docs link to (rule YAML, corpus logs, READMEs).

On GitHub a link such as `../../rules/zero_stage_mismatch/DS-Z001-....yaml` in docs/rules/
reaches the file in the repository. In the site that file lies outside docs/, and
`mkdocs build --strict` would call the link broken. These hooks copy every repository file
the docs link to (and, for a linked Markdown file, what it links to) into the site under
`repo/`, and point the links there; the Markdown on disk stays as GitHub reads it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from mkdocs.structure.files import File

PREFIX = "repo"
LINK = re.compile(r"(\]\()([^)\s#]+)(#[^)\s]*)?(\))")


def _paths(config) -> tuple[Path, Path]:
    docs = Path(config["docs_dir"]).resolve()
    return docs, Path(config["config_file_path"]).resolve().parent


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _targets(text: str, base: Path):
    for match in LINK.finditer(text):
        target = match.group(2)
        if "://" in target or target.startswith(("mailto:", "/")):
            continue
        yield match, (base / target).resolve()


def _linked_from_outside(config) -> list[str]:
    """Repository files outside docs/ that the docs link to, followed through linked Markdown."""
    docs, root = _paths(config)
    queue = sorted(docs.rglob("*.md"))
    seen: set[Path] = set()
    while queue:
        page = queue.pop()
        for _, path in _targets(page.read_text(encoding="utf-8"), page.parent):
            if _inside(path, docs) or not _inside(path, root) or not path.is_file() or path in seen:
                continue
            seen.add(path)
            if path.suffix == ".md":
                queue.append(path)
    return sorted(p.relative_to(root).as_posix() for p in seen)


def on_files(files, config):
    _, root = _paths(config)
    for rel in _linked_from_outside(config):
        files.append(File.generated(config, f"{PREFIX}/{rel}", abs_src_path=str(root / rel)))
    return files


def on_page_markdown(markdown, page, config, files):
    docs, root = _paths(config)
    real = Path(page.file.abs_src_path).resolve().parent  # where the links were written from
    shown = (docs / page.file.src_uri).parent  # where the page stands in the site

    def point(match):
        target = (real / match.group(2)).resolve()
        if _inside(target, docs):
            new = target
        elif _inside(target, root) and target.is_file():
            new = docs / PREFIX / target.relative_to(root)
        else:
            return match.group(0)
        if real == shown and new == target:
            return match.group(0)
        rel = Path(os.path.relpath(new, shown)).as_posix()
        return f"{match.group(1)}{rel}{match.group(3) or ''}{match.group(4)}"

    return "\n".join(_outside_code(line, point) for line in markdown.split("\n"))


def _outside_code(line: str, point) -> str:
    # Inline code may show a link-like text (`[x](y)`): rewrite only outside backticks.
    parts = re.split(r"(`+[^`]*`+)", line)
    return "".join(part if part.startswith("`") else LINK.sub(point, part) for part in parts)
