"""The rules as pages: the on-call lookup and every generated document.

In: the loaded rules (`triage.kb`) and the site catalogue. Out: `search` ranks rules for a
query (`ds-triage runbook`), `render` prints a rule's page; `docgen` writes `docs/rules/`,
`docs/load-sites.md` and `docs/reference/` (`ds-triage rules docs`) from `rule_docs`,
`site_docs`, `schema_docs` and the shared `sections`.
"""
