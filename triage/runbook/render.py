"""`ds-triage runbook` output: a rule's page for the terminal, the other matches, the
list by category, and the JSON object (docs/schemas/runbook.schema.json).

The page's content is `triage.runbook.sections.page`, the same the docs pages are rendered from;
this module only lays it out (headings, wrapping, indentation, colour).
"""

from __future__ import annotations

import textwrap

from triage.kb.model import Rule
from triage.classify.render import Style
from triage.kb.verify_steps import ordered, runs_code
from triage.runbook.search import Found
from triage.runbook.sections import (DOCS_SECTIONS, TERMINAL_SECTIONS, Code, CodeBlock, Example, Items, Link, Para, Strong, page,
                             symptoms)

SCHEMA_VERSION = 1
WIDTH = 100
OTHERS = 5  # other matches listed under the page


def plain(spans) -> str:
    """Inline spans as plain text (the JSON's strings)."""
    return "".join(s.text if isinstance(s, (Code, Strong, Link)) else str(s) for s in spans)


def _styled(spans, style: Style) -> str:
    out = []
    for span in spans:
        if isinstance(span, Code):
            out.append(style(span.text, "36"))
        elif isinstance(span, Strong):
            out.append(style(span.text, "1"))
        elif isinstance(span, Link):
            out.append(span.text)
        else:
            out.append(str(span))
    return "".join(out)


def _wrap(text: str, indent: str, hanging: str, width: int) -> list[str]:
    # break_on_hyphens off: paths and flags (zero_to_fp32, --no-build-isolation) stay whole.
    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=hanging,
                         break_long_words=False, break_on_hyphens=False) or [indent.rstrip()]


def _blocks(blocks, style: Style, indent: str, width: int) -> list[str]:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Para):
            # The cause is hard-wrapped for the YAML file: reflow it, keeping its paragraphs.
            for paragraph in _styled(block.spans, style).split("\n\n"):
                out += _wrap(" ".join(paragraph.split()), indent, indent, width)
        elif isinstance(block, CodeBlock):
            out += [style(f"{indent}  {line}", "2") for line in block.lines]
        elif isinstance(block, Items):
            for number, item in enumerate(block.items, start=1):
                marker = f"{number}. " if block.ordered else "- "
                if len(item.spans) == 1 and isinstance(item.spans[0], Code):  # a command: never wrapped
                    out.append(indent + marker + _styled(item.spans, style))
                else:
                    out += _wrap(_styled(item.spans, style), indent + marker, indent + " " * len(marker), width)
                out += _blocks(item.children, style, indent + " " * len(marker), width)
    return out


def render_page(rule: Rule, source: str, example: Example | None, style: Style | None = None,
                width: int = WIDTH, whole: bool | None = None) -> str:
    """The rule's page for a terminal. `whole`: every section, the signature and examples too (the
    default when no docs site is configured: an installed tool has no docs/ to point at); else the
    sections an on-call reader needs, and where the whole page is."""
    from triage.runbook.links import runbook_url

    style = style or Style(False)
    url = runbook_url(rule.id)
    whole = url is None if whole is None else whole
    data = rule.data
    out = [style(f"{rule.id}  {rule.title}", "1"),
           f"category {rule.category}, status {data['status']}, priority {rule.priority}: {source}"]
    sections = {section.name: section for section in page(rule, example)}
    for name in DOCS_SECTIONS if whole else TERMINAL_SECTIONS:
        if name in sections:  # an optional section (sections.OPTIONAL_SECTIONS) only where the rule has it
            out += ["", style(name.upper(), "1")] + _blocks(sections[name].blocks, style, "  ", width)
    if not whole:
        out += ["", style(f"Full page with the signature and examples: {url or f'ds-triage runbook {rule.id}'}", "2")]
    return "\n".join(out) + "\n"


def render_others(found: Found, style: Style | None = None, limit: int = OTHERS) -> str:
    style = style or Style(False)
    others = found.results[1:] if found.kind != "none" else found.results
    if found.kind != "category":
        others = others[:limit]
    if not others:
        return ""
    if found.kind == "category":
        head = f"Other rules in {found.category}:"
    elif found.kind == "none":
        head = f"No good match for {found.query!r}. The closest rules (score 0-100):"
    else:
        head = "Also matching (score 0-100):"
    out = [style(head, "1")]
    for result in others:
        score = "" if found.kind == "category" else f"{result.score:>3}  "
        out.append(f"  {result.rule.id}  {score}{result.rule.title}")
    if found.kind == "none":
        out.append("`ds-triage runbook --list` lists every rule by category.")
    else:
        out.append(style("Open one with `ds-triage runbook ID`.", "2"))
    return "\n".join(out) + "\n"


def render_list(rules: list[Rule]) -> str:
    by_category: dict[str, list[Rule]] = {}
    for rule in rules:
        by_category.setdefault(rule.category, []).append(rule)
    out = []
    for category in sorted(by_category):
        out.append(f"{category} ({len(by_category[category])})")
        for rule in sorted(by_category[category], key=lambda r: r.id):
            out.append(f"  {rule.id}  {rule.data['status']:<12} {rule.title}")
    return "\n".join(out) + "\n"


def page_json(rule: Rule, source: str, example: Example | None) -> dict:
    data = rule.data
    return {
        "id": rule.id,
        "title": rule.title,
        "category": rule.category,
        "status": data["status"],
        "priority": rule.priority,
        "source": source,
        "docs": f"docs/rules/{rule.id}.md",
        "summary": data["summary"],
        "symptoms": [plain(spans) for spans in symptoms(rule)],
        "example": {"source": example.source, "lines": list(example.lines)} if example else None,
        "cause": data["cause"].strip(),
        "verify": [{"command": s["command"], "shows": s["shows"], "runs_checkpoint_code": runs_code(s)}
                   for s in ordered(data["verify"])],
        "probes": list(data.get("probes", [])),
        "repairs": list(data.get("repairs", [])),
        "fix": [{k: step[k] for k in ("title", "detail", "safety", "why") if k in step} for step in data["fix"]],
        "prevention": list(data["prevention"]),
        "references": [dict(ref) for ref in data["references"]],
        "false_positives": data["false_positives"].strip(),
    }


def to_json(found: Found | None, rules: list[Rule], page: dict | None) -> dict:
    """`found` is None for --list (every rule, by category then id, no score)."""
    if found is None:
        ordered = sorted(rules, key=lambda r: (r.category, r.id))
        results = [_result(rule, None, None, None) for rule in ordered]
        return {"schema_version": SCHEMA_VERSION, "query": None, "kind": "list", "category": None,
                "results": results, "page": None}
    return {
        "schema_version": SCHEMA_VERSION,
        "query": found.query,
        "kind": found.kind,
        "category": found.category,
        "results": [_result(r.rule, r.score, r.field, r.text) for r in found.results],
        "page": page,
    }


def _result(rule: Rule, score, field, text) -> dict:
    return {"id": rule.id, "title": rule.title, "category": rule.category, "status": rule.data["status"],
            "score": score, "matched": {"field": field, "text": text} if field else None}
