"""Where a rule's runbook page lives on the web: the `runbook_url` of every hypothesis.

The docs are a mkdocs site (`mkdocs build`), published wherever the team hosts it; its base
URL comes from `--docs-url`, else `DS_TRIAGE_DOCS_URL` (the same variable sets mkdocs.yml's
`site_url`). With neither there is no page to link to: `runbook_url` is null and the
report names the `ds-triage runbook RULE` command instead, which works offline, and help texts
name the Markdown page the package carries.
"""

from __future__ import annotations

import os

ENV = "DS_TRIAGE_DOCS_URL"


def set_docs_url(url: str | None) -> None:
    """--docs-url: kept in the environment so that serve's worker processes see it too."""
    if url:
        os.environ[ENV] = url


def docs_url() -> str | None:
    url = os.environ.get(ENV, "").strip()
    return url.rstrip("/") + "/" if url else None


def runbook_url(rule_id: str) -> str | None:
    """The rule's page in the site (mkdocs' directory URLs: docs/rules/DS-X003.md -> rules/DS-X003/)."""
    base = docs_url()
    return f"{base}rules/{rule_id}/" if base else None


def page_ref(page: str) -> str:
    """How help text names a docs page: its URL in the published site, else the Markdown file
    itself, in the checkout or in the installed package (setup.py bundles docs/), a path to open."""
    base = docs_url()
    if base:
        return f"{base}{page}/"
    from triage.kb.index import data_path

    return str(data_path(f"docs/{page}.md"))


def check_docs_url(url: str) -> str:
    """argparse type for --docs-url: an http(s) URL."""
    import argparse
    from urllib.parse import urlsplit  # only when --docs-url is given: 3 ms of every start otherwise

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise argparse.ArgumentTypeError(f"not an http(s) URL: {url!r}")
    return url
