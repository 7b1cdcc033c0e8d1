"""/runbook in the chat: the same page `ds-triage runbook QUERY` prints."""

from __future__ import annotations

from triage.render import Style

WIDTH = 100


def runbook_page(rules, query: str, style: Style) -> str:
    from triage import runbook
    from triage.docgen import rule_sources
    from triage.example_lines import example_error
    from triage.runbook_render import render_others, render_page

    found = runbook.search(runbook.build_index(rules.rules), query)
    out = []
    if found.best is not None:
        rule = found.best.rule
        root = rules.directory.resolve().parent
        path = rule_sources(rules).get(rule.id)
        source = path.resolve().relative_to(root).as_posix() if path else rule.path
        out.append(render_page(rule, source, example_error(rule, root), style, WIDTH))
    others = render_others(found, style)
    if others:
        out.append(("\n" if out else "") + others)
    return "".join(out)
