"""/runbook in the chat: the same page `ds-triage runbook QUERY` prints."""

from __future__ import annotations

from triage.classify.render import Style

WIDTH = 100


def runbook_page(rules, query: str, style: Style, width: int | None = None) -> str:
    """`width`: the terminal's, in the chat; else the runbook's own."""
    from triage.runbook.search import build_index, search
    from triage.runbook.docgen import rule_sources
    from triage.classify.example_lines import example_error
    from triage.runbook.render import render_others, render_page

    found = search(build_index(rules.rules), query)
    out = []
    if found.best is not None:
        rule = found.best.rule
        root = rules.directory.resolve().parent
        path = rule_sources(rules).get(rule.id)
        source = path.resolve().relative_to(root).as_posix() if path else rule.path
        out.append(render_page(rule, source, example_error(rule, root), style, width or WIDTH, whole=False))
    others = render_others(found, style)
    if others:
        out.append(("\n" if out else "") + others)
    return "".join(out)
