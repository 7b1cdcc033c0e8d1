"""docs/load-sites.md's coverage per project and release, and its sections for the projects read
only from their releases or a snapshot (triage.kb.projects): issue 42, items 1 and 6."""

from __future__ import annotations

from triage.kb import site_history
from triage.kb.messages import indexed
from triage.kb.sites import site_key
from triage.runbook.rule_docs import table_code

MESSAGE_CHARS = 160


def per_release(history: dict, rules_of: dict[tuple, list[str]]) -> list[str]:
    """The table: per project and release, the sites catalogued, those a rule covers, and those
    in the message index (recognised pasted alone). `rules_of`: site_key -> covering rule ids."""
    out = ["", "## Coverage per project and release", "",
           "Per release read: the failure sites that release has (`raise`, `assert`, a message logged right "
           "before a failure, a message collected for a raise to join), how many a rule covers (it names the "
           "message or the raise, above), and how many the message index holds, so that their message pasted "
           "alone names the site (`tests/test_site_recognition.py` pastes each). A bare `assert`, a message "
           "that is code, and a logged line of fewer than 24 characters of text are not in the index.", "",
           "| project | release | sites | with a rule | recognised alone |", "|---|---|--:|--:|--:|"]
    for package, data in history.get("packages", {}).items():
        order = data["releases"]
        counts = {release: [0, 0, 0] for release in order}
        for e in data["sites"]:
            site = site_history.as_site(package, e)
            covered, known = bool(rules_of.get(site_key(site))), indexed(site)
            for release in site_history.expand(e["releases"], order):
                counts[release][0] += 1
                counts[release][1] += covered
                counts[release][2] += known
        for release in order:
            n, ruled, known = counts[release]
            out.append(f"| {package} | {release} | {n} | {ruled} | {known} |")
    return out


def project_names(history: dict) -> str:
    """The projects read beside DeepSpeed and torch, as the index orders them: "a, b and c"."""
    names = [package for package in history.get("packages", {}) if package not in ("deepspeed", "torch")]
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)


def project_sections(covered: list[tuple[object, list[str]]], history: dict) -> list[str]:
    """One section per project read from its releases or a snapshot: every site with its releases."""
    out = []
    by_package: dict[str, list] = {}
    for site, ids in covered:
        by_package.setdefault(site.package, []).append((site, ids))
    for package in sorted(by_package):
        sites = by_package[package]
        releases = ", ".join(history["packages"][package]["releases"])
        out += ["", f"## {package}", "",
                f"{len(sites)} sites read from {releases} (`python -m triage.kb.site_history_build`; "
                f"{sum(bool(ids) for _, ids in sites)} covered by a rule).", "",
                "| file | function | kind | exception | message template | releases | rules |",
                "|---|---|---|---|---|---|---|"]
        index = {site_key(site_history.as_site(package, e)): e["releases"] for e in history["packages"][package]["sites"]}
        for site, ids in sorted(sites, key=lambda item: (item[0].file, item[0].function, item[0].message or "")):
            rules = ", ".join(f"[{rule_id}](rules/{rule_id}.md)" for rule_id in ids) or "**none**"
            out.append(f"| {site.file} | {table_code(site.function)} | {site.kind} | {table_code(site.exception)} | "
                       f"{message(site)} | {', '.join(index.get(site_key(site), ())) or '-'} | {rules} |")
    return out


def message(site) -> str:
    if site.message is None:
        return "(bare) " + table_code(site.code)
    text = site.message.replace("\n", "\\n").replace("\t", "\\t")
    if len(text) > MESSAGE_CHARS:
        text = text[:MESSAGE_CHARS - 3] + "..."
    return table_code(text)
