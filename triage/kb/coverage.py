"""Which rules cover which raise sites on the checkpoint load path (triage.kb.sites).

A site is covered by a rule when one of the rule's `references` names the site's file
(`source: deepspeed/<file>` or `torch/<file>`) and a `function` that matches the site's
qualified name (`SDLoaderBase.check_ckpt_list`) or its bare name (`check_ckpt_list`).
`function` may be an fnmatch glob: `DeepSpeedZeroOptimizer.*`, `merge_*`, `*`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from fnmatch import fnmatchcase


def site_source(site) -> str:
    """The site's file as a rule reference names it: deepspeed/runtime/engine.py."""
    return f"{site.package}/{site.file}"


def function_matches(pattern: str, qualname: str) -> bool:
    bare = qualname.rsplit(".", 1)[-1]
    return fnmatchcase(qualname, pattern) or fnmatchcase(bare, pattern)


def reference_covers(reference: dict, site) -> bool:
    source, function = reference.get("source"), reference.get("function")
    if not source or not function or source != site_source(site):
        return False
    return function_matches(function, site.function)


def rules_covering(site, rules) -> list[str]:
    """Ids of the rules (sorted) with a reference that covers this site."""
    return sorted({rule.id for rule in rules
                   if any(reference_covers(ref, site) for ref in rule.data.get("references", []))})


@dataclass(frozen=True)
class FileCoverage:
    source: str
    sites: int
    covered: int

    @property
    def uncovered(self) -> int:
        return self.sites - self.covered


def coverage(sites, rules) -> list[tuple[object, list[str]]]:
    """(site, covering rule ids) for every site, in the order given."""
    rules = list(rules)
    return [(site, rules_covering(site, rules)) for site in sites]


def per_file(covered: list[tuple[object, list[str]]]) -> list[FileCoverage]:
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for site, ids in covered:
        entry = counts[site_source(site)]
        entry[0] += 1
        entry[1] += bool(ids)
    return [FileCoverage(source, n, c) for source, (n, c) in sorted(counts.items())]


def uncovered_by_file(covered: list[tuple[object, list[str]]]) -> dict[str, list]:
    out: dict[str, list] = defaultdict(list)
    for site, ids in covered:
        if not ids:
            out[site_source(site)].append(site)
    return {source: sorted(items, key=lambda s: s.line) for source, items in sorted(out.items())}


def describe_site(site) -> str:
    message = "(bare)" if site.message is None else site.message.replace("\n", "\\n")
    if len(message) > 100:
        message = message[:97] + "..."
    return f"line {site.line} in {site.function}: {site.exception}: {message}"
