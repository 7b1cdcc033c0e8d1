"""Search quality of `ds-triage runbook`: what an on-call engineer types, and what must come first.

The expectations come from reading the rules, not from running the search:

- "size mismatch" and "Missing key(s)": torch's load_state_dict error. DS-M001 is the general
  rule (its cause names the special cases: DS-M002 `_orig_mod.`, DS-M003 `module.`, DS-M004
  and DS-H002 `torch.Size([0])`, DS-H001 adapters); a query without the special detail lands
  on the general page and lists the special ones next.
- "latest": DS-F004 is the missing `latest` file at load time; DS-F005 (a tag directory passed),
  DS-F102 (zero_to_fp32 without --tag) and DS-B001 (ZeRO-3 ignoring the tag) are its variants.
- "EOFError": only DS-X003 has the exception (torch.load of an empty file).
- "PytorchStreamReader": DS-X001's message ("PytorchStreamReader failed reading zip archive").
- "DP world size": DS-P001's message ("used a DP world size of N but the current world size is M").
- "Permission denied": the category permission_denied, whose one rule is DS-A001.
- "weights only": DS-U001 (weights_only=True refused a global); DS-U002 is the
  TORCH_FORCE_WEIGHTS_ONLY_LOAD special case.
- "DS-Z001", "zero_stage_mismatch": an id and a category, exact.
- "bare assertion check_ckpt_list": the bare `assert len(self.ckpt_list) > 0`; DS-F001 is the
  general "no model-states file" rule whose summary says exactly that, and whose cause sends
  to DS-Z001/DS-Z002 (stage change) and DS-A001 (unreadable directory), which follow.
- "killed -9": DS-R002, a rank killed by SIGKILL (exit code -9).
"""

import pytest

from triage.runbook import search as runbook

# query, what must come first (a rule id, or category:NAME), rules that must be in the top 5
QUERIES = [
    ("size mismatch", "DS-M001", {"DS-M004", "DS-H002"}),
    ("latest", "DS-F004", {"DS-F005", "DS-F102"}),
    ("EOFError", "DS-X003", set()),
    ("PytorchStreamReader", "DS-X001", set()),
    ("DP world size", "DS-P001", set()),
    ("Permission denied", "DS-A001", set()),
    ("weights only", "DS-U001", {"DS-U002"}),
    ("DS-Z001", "DS-Z001", set()),
    ("zero_stage_mismatch", "category:zero_stage_mismatch", {"DS-Z001", "DS-Z002", "DS-Z003"}),
    ("bare assertion check_ckpt_list", "DS-F001", {"DS-Z001", "DS-Z002"}),
    ("killed -9", "DS-R002", set()),
    ("Missing key(s)", "DS-M001", {"DS-H001", "DS-H005", "DS-V005"}),  # adapters, a tied head, buffers
    # the same, as people also type them
    ("ds-z001", "DS-Z001", set()),
    ("permission_denied", "category:permission_denied", {"DS-A001"}),
    ("PytorchStreamReadr failed", "DS-X001", set()),  # a typo
    ("SIGKILL", "DS-R002", set()),
    ("Unable to find latest file", "DS-F004", set()),
]


@pytest.fixture(scope="module")
def index(rules):
    return runbook.build_index(rules.rules)


@pytest.mark.parametrize("query, first, also", QUERIES, ids=[q for q, _, _ in QUERIES])
def test_query_returns_the_expected_rule_first(index, query, first, also):
    found = runbook.search(index, query)
    assert found.results, f"{query!r}: nothing found"
    top = found.results[0]
    shown = [(r.rule.id, r.score) for r in found.results[:6]]
    if first.startswith("category:"):
        category = first.split(":", 1)[1]
        assert found.kind == "category" and found.category == category, shown
        assert all(r.rule.category == category for r in found.results), shown
    else:
        assert top.rule.id == first, f"{query!r}: {shown}"
    top5 = {r.rule.id for r in found.results[:5]}
    assert also <= top5, f"{query!r}: {sorted(also - top5)} not in the top 5: {shown}"


def test_every_rule_id_and_category_is_found_exactly(index, rules):
    for rule in rules.rules:
        found = runbook.search(index, rule.id)
        assert found.kind == "id" and found.results[0].rule.id == rule.id
    for category in {r.category for r in rules.rules}:
        found = runbook.search(index, category)
        assert found.kind == "category" and {r.rule.category for r in found.results} == {category}


def test_every_rule_is_found_by_its_title(index, rules):
    for rule in rules.rules:
        found = runbook.search(index, rule.title)
        assert found.kind == "fuzzy" and found.results[0].rule.id == rule.id, rule.id


@pytest.mark.parametrize("query", ["kubernetes ingress annotation", "qwzx", "banana smoothie recipe"])
def test_nonsense_finds_no_good_match(index, query):
    found = runbook.search(index, query)
    assert found.kind == "none", [(r.rule.id, r.score) for r in found.results[:3]]
    assert found.results, "the closest rules are still offered"
