"""Every rule's own examples, one test each: `match` ranks the rule first, `no-match`
does not fire it. `todo-` examples are known gaps: strict xfail, so one that starts to
pass fails here until its todo- prefix is dropped."""

import pytest

from tests.session import session_rules
from triage.errors import BadRules
from triage.kb.examples import example_failure, iter_examples


def _params():
    try:
        examples = iter_examples(session_rules())
    except BadRules as exc:  # reported by the one test below, not as a collection error
        return [pytest.param(None, exc.message, id="rules-invalid")]
    params = []
    for example in examples:
        marks = [pytest.mark.xfail(strict=True, reason=f"known gap ({example.expect})")] if example.todo else []
        params.append(pytest.param(example, None, marks=marks,
                                   id=f"{example.rule_id}-{example.index}-{example.expect}"))
    return params


@pytest.mark.parametrize("example, problem", _params())
def test_rule_example(example, problem, rules):
    assert example is not None, f"the rules do not load:\n{problem}"
    failure = example_failure(example, rules)
    assert failure is None, f"{failure} ({example.label})"
