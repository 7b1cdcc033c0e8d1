"""Generate the docs that come from the rules, write them, or check them against disk.

`generate(rules, out)` returns {path under out: text}: rules/index.md (by category),
rules/errors.md (by error text), rules/<ID>.md for each rule, load-sites.md, exit-codes.md (from
triage/cli/exit_codes.py), reference/index.md
with reference/<name>.md for each JSON output schema in docs/schemas/, and schemas/bundled/<name>,
its self-contained copy. Nothing in it depends on the
clock or on the order files are found in, so `--check` is stable.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from triage.errors import BadInput
from triage.kb.index import RuleSet, rule_files
from triage.runbook.exit_code_docs import exit_codes_page
from triage.runbook.rule_docs import errors_page, index_page, rule_page
from triage.classify.example_lines import example_error
from triage.runbook.schema_bundle import BUNDLED, bundle_pages
from triage.runbook.schema_docs import SUFFIX, reference_pages
from triage.runbook.site_docs import load_sites_page

REGENERATE = "ds-triage rules docs"
SCHEMAS = Path("docs") / "schemas"  # the JSON output schemas, under the repository root
# The generated pages of each folder; any other file there is left alone.
PAGE_GLOBS = {"rules": "DS-*.md", "reference": "*.md", BUNDLED: "*" + SUFFIX}


def load_sites():
    """(sites, versions) from the installed deepspeed and torch source (parsed, not imported)."""
    from importlib import metadata

    from triage.kb.sites import load_path_sites

    try:
        sites = load_path_sites()
    except ModuleNotFoundError as exc:
        raise BadInput(f"docs/load-sites.md is read from the deepspeed and torch source: {exc} "
                       "(install them: pip install -e '.[probe]')") from None
    versions = {}
    for name in ("deepspeed", "torch"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "(version unknown)"
    return sites, versions


def older_sites(sites, rules) -> list[tuple[object, list[str], list[str]]]:
    """(site, releases, covering rule ids) of the sites only older releases have (site_history.json)."""
    from triage.kb import site_history
    from triage.kb.coverage import rules_covering

    return [(site, releases, rules_covering(site, rules)) for site, releases in site_history.older_only(sites)]


def rule_sources(rules: RuleSet) -> dict[str, Path]:
    """Rule id -> its file. The validator makes every file name start with its rule's id."""
    ids = {rule.id for rule in rules.rules}
    out = {}
    for path in rule_files(rules.directory):
        # the id is the stem or a prefix of it ending before a dash: looked up, not compared with
        # every rule (a runbook page spent 70 ms here over 101 rules)
        stem = path.stem
        cuts = [stem] + [stem[:i] for i, c in enumerate(stem) if c == "-"]
        for cut in cuts:
            if cut in ids:
                out[cut] = path
    return out


def load_schemas(directory: Path) -> dict[str, dict]:
    """{file name: schema} of the JSON output schemas; {} when there is no such directory."""
    return {path.name: json.loads(path.read_text(encoding="utf-8")) for path in sorted(directory.glob("*" + SUFFIX))}


def generate(rules: RuleSet, out: str | Path, sites=None, versions=None) -> dict[str, str]:
    from triage.kb.coverage import coverage

    out = Path(out).resolve()
    root = rules.directory.resolve().parent
    pages_dir = out / "rules"

    def link(path_from_root: str | Path, pages: Path = pages_dir) -> str:
        return Path(os.path.relpath(root / path_from_root, pages)).as_posix()

    sources = rule_sources(rules)
    ordered = sorted(rules.rules, key=lambda r: r.id)
    files = {"rules/index.md": index_page(ordered), "rules/errors.md": errors_page(ordered)}
    for rule in ordered:
        source = sources.get(rule.id)
        shown = source.resolve().relative_to(root).as_posix() if source else rule.path
        files[f"rules/{rule.id}.md"] = rule_page(rule, shown, link, example_error(rule, root))
    if sites is None:
        sites, versions = load_sites()
    files["load-sites.md"] = _load_sites_page(sites, versions, ordered)
    files["exit-codes.md"] = exit_codes_page()
    schemas = load_schemas(root / SCHEMAS)
    files.update(reference_pages(schemas, lambda name: link(SCHEMAS / name, out / "reference")))
    files.update(bundle_pages(schemas))
    return dict(sorted(files.items()))


def _load_sites_page(sites, versions, ordered) -> str:
    from triage.kb import site_history
    from triage.kb.coverage import coverage, named_only
    from triage.kb.sites import site_key
    from triage.runbook.site_projects import per_release, project_sections

    covered = coverage(sites, ordered)
    older = older_sites(sites, ordered)
    elsewhere = coverage([site for site in catalogued_elsewhere(sites) if site.package not in (versions or {})], ordered)
    rules_of = {site_key(site): ids for site, ids in covered + elsewhere}
    rules_of.update((site_key(site), ids) for site, _, ids in older)
    history = site_history.load()
    return load_sites_page(covered, versions or {}, older, named=named_only(covered, ordered),
                           per_release=per_release(history, rules_of), projects=project_sections(elsewhere, history))


def catalogued_elsewhere(sites) -> list:
    """The sites of the site history (triage/kb/site_history.json) that the installed source lacks:
    older releases of DeepSpeed and torch, and every project read only from its releases or snapshot."""
    from triage.kb import site_history
    from triage.kb.sites import site_key

    have = {site_key(site) for site in sites}
    return [site for site, _ in site_history.every_site() if site_key(site) not in have]


def message_index(rules: RuleSet, sites, versions) -> tuple[Path, str]:
    """The message index classify reads (triage.kb.messages), beside the rules: (path, text)."""
    from triage.kb import messages
    from triage.kb.coverage import coverage

    covered = coverage(list(sites) + catalogued_elsewhere(sites), sorted(rules.rules, key=lambda r: r.id))
    return rules.directory / messages.INDEX_NAME, messages.render(messages.entries(covered, versions or {}))


def stale(out: str | Path, files: dict[str, str]) -> list[str]:
    """What differs on disk: 'missing X', 'changed X', 'extra X' (a page of no rule or schema)."""
    out = Path(out)
    problems = []
    for name, text in files.items():
        path = out / name
        if not path.is_file():
            problems.append(f"missing {path}")
        elif path.read_text(encoding="utf-8") != text:
            problems.append(f"changed {path}")
    problems += [f"extra {path}" for path in _orphans(out, files)]
    return problems


def write(out: str | Path, files: dict[str, str]) -> list[str]:
    """Write what differs, delete pages of rules or schemas that no longer exist; returns what changed."""
    out = Path(out)
    changed = []
    for name, text in files.items():
        path = out / name
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        changed.append(f"wrote {path}")
    for path in _orphans(out, files):
        path.unlink()
        changed.append(f"removed {path}")
    return changed


def _orphans(out: Path, files: dict[str, str]) -> list[Path]:
    """Generated pages on disk that `files` no longer has (a removed rule or schema)."""
    return sorted(path for folder, pattern in PAGE_GLOBS.items() for path in (out / folder).glob(pattern)
                  if f"{folder}/{path.name}" not in files)
