"""A known_bug rule's `releases`: lint requires it and checks its PEP 440 specifiers, naming the
file and line; every known_bug rule of the bundled set carries it."""

import re

import pytest

from triage.errors import BadRules
from triage.kb import load_rules
from tests.rule_files import rules_dir, valid_rule

RELEASES = """\
        releases:
          decided_by: load
          deepspeed:
            affected: "{affected}"
            fixed: {fixed}
            checked: read the sources of the releases around the change
        false_positives: none known"""


def known_bug(affected=">=0.10.2", fixed="null", decided_by="load") -> str:
    block = RELEASES.format(affected=affected, fixed=fixed).replace("decided_by: load", f"decided_by: {decided_by}")
    return valid_rule(**{"category: zero_stage_mismatch": "category: known_bug",
                         "        false_positives: none known": block})


def _problems(tmp_path, text) -> list[str]:
    with pytest.raises(BadRules) as info:
        load_rules(rules_dir(tmp_path, {"DS-T001-test.yaml": text}), use_cache=False)
    return info.value.problems


def _line_of(text: str, needle: str) -> int:
    import textwrap

    return next(n for n, line in enumerate(textwrap.dedent(text).splitlines(), 1) if needle in line)


def test_a_known_bug_rule_with_releases_loads_and_exposes_them(tmp_path):
    rules = load_rules(rules_dir(tmp_path, {"DS-T001-test.yaml": known_bug(">=0.14.0,<0.18.0", '"0.18.0"')}),
                       use_cache=False)
    [rule] = rules.rules
    bug = rule.releases
    assert bug.decided_by == "load"
    deepspeed = bug.package("deepspeed")
    assert str(deepspeed.fixed) == "0.18.0"
    assert [deepspeed.has_defect(v) for v in ("0.13.5", "0.14.0", "0.16.9", "0.17.6", "0.18.0", "0.19.8")] == \
        [False, True, True, True, False, False]
    assert deepspeed.has_defect("0.16.0rc1") is True and deepspeed.has_defect("not a version") is None


def test_a_known_bug_rule_without_releases_is_refused(tmp_path):
    text = valid_rule(**{"category: zero_stage_mismatch": "category: known_bug"})
    [problem] = _problems(tmp_path, text)
    assert "DS-T001-test.yaml:1:" in problem
    assert "lacks 'releases'" in problem and "known_bug" in problem


@pytest.mark.parametrize("bad", ["=>0.10.2", ">=0.10.2;<0.11", "0.10.2", ">=zero"])
def test_a_malformed_affected_specifier_names_the_file_and_its_line(tmp_path, bad):
    text = known_bug(affected=bad)
    [problem] = _problems(tmp_path, text)
    assert f"DS-T001-test.yaml:{_line_of(text, 'affected:')}:" in problem
    assert "not a PEP 440 specifier set" in problem and repr(bad) in problem


def test_a_malformed_fixed_release_names_its_line(tmp_path):
    text = known_bug(fixed='"soon"')
    [problem] = _problems(tmp_path, text)
    assert f"DS-T001-test.yaml:{_line_of(text, 'fixed:')}:" in problem and "not a PEP 440 version" in problem


def test_a_fixed_release_inside_the_affected_ones_is_refused(tmp_path):
    text = known_bug(affected="<0.10.0", fixed='"0.9.0"')
    [problem] = _problems(tmp_path, text)
    assert f"DS-T001-test.yaml:{_line_of(text, 'fixed:')}:" in problem
    assert "0.9.0 is inside affected <0.10.0" in problem


def test_releases_on_another_category_are_refused(tmp_path):
    other = known_bug().replace("category: known_bug", "category: zero_stage_mismatch")
    [problem] = _problems(tmp_path, other)
    line = int(problem.split(".yaml:")[1].split(":")[0])
    assert line in (_line_of(other, "releases:"), _line_of(other, "decided_by:"))  # the block's first line
    assert "releases is for known_bug rules" in problem


@pytest.mark.parametrize("old,new,says", [
    ("          deepspeed:\n", "          deepspeeed:\n", "spelling"),
    ("decided_by: load", "decided_by: runtime", "'runtime' is not allowed"),
])
def test_an_unknown_package_or_decider_is_refused(tmp_path, old, new, says):
    text = known_bug().replace(old, new)
    assert old in known_bug()
    problems = _problems(tmp_path, text)
    assert any(says in p and "DS-T001-test.yaml:" in p for p in problems), problems


def test_every_bundled_known_bug_rule_names_its_releases_and_cites_a_fix_or_says_none():
    rules = load_rules()
    bugs = [rule for rule in rules.rules if rule.category == "known_bug"]
    assert len(bugs) >= 11
    for rule in bugs:
        releases = rule.releases
        assert releases is not None and releases.packages, rule.id
        urls = " ".join(ref.get("url", "") for ref in rule.data["references"])
        for package in releases.packages:
            assert len(package.checked) > 40, rule.id
            if package.fixed is not None:  # a fixed release names the change that fixed it
                assert re.search(r"/pull/\d+", urls) or "PR" in package.checked, rule.id
