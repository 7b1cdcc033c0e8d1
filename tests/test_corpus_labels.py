"""The corpus labels agree with the knowledge base: each expected rule exists and
belongs to the case's expected category."""

from tests.corpus_cases import manifest


def test_expected_rules_exist_and_match_the_category(rules):
    by_id = {rule.id: rule for rule in rules.rules}
    labelled = [e for e in manifest() if e.get("expected_rule")]
    assert len(labelled) >= 100
    wrong = [
        f"{e['id']}: {e['expected_rule']} " + (f"is {by_id[e['expected_rule']].category}, expected {e['expected_category']}"
                                              if e["expected_rule"] in by_id else "is not a rule")
        for e in labelled
        if e["expected_rule"] not in by_id or by_id[e["expected_rule"]].category != e["expected_category"]
    ]
    assert not wrong, "\n".join(wrong)


def test_every_failure_case_is_labelled():
    unlabelled = [e["id"] for e in manifest() if e["kind"] != "clean" and "expected_rule" not in e]
    assert not unlabelled, f"run `python -m corpus.generate --reindex`: {unlabelled}"
