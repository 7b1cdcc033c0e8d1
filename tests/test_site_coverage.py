"""Which rules cover which raise sites on the checkpoint load path (triage.kb.coverage)."""

import pytest

from tests.rule_files import rules_dir, valid_rule
from triage.kb.coverage import coverage, describe_site, function_matches, per_file, reference_covers, uncovered_by_file
from triage.errors import BadRules
from triage.kb import load_rules
from triage.kb.model import compile_rule
from triage.kb.sites import Site


def site(file="runtime/zero/stage_1_and_2.py", function="DeepSpeedZeroOptimizer.load_state_dict", package="deepspeed", line=10):
    return Site(package, file, function, line, "raise", "RuntimeError", "boom {x}", "raise RuntimeError(...)")


def ref(source="deepspeed/runtime/zero/stage_1_and_2.py", function="DeepSpeedZeroOptimizer.load_state_dict"):
    return {"source": source, "function": function}


@pytest.mark.parametrize("pattern, qualname, expected", [
    ("DeepSpeedZeroOptimizer.load_state_dict", "DeepSpeedZeroOptimizer.load_state_dict", True),
    ("load_state_dict", "DeepSpeedZeroOptimizer.load_state_dict", True),  # the bare name
    ("DeepSpeedZeroOptimizer.*", "DeepSpeedZeroOptimizer._restore_from_bit16_weights", True),
    ("merge_*", "merge_tp_slices", True),
    ("_load_[a-z]*", "DeepSpeedEngine._load_checkpoint", True),
    ("*", "anything.at_all", True),
    ("load_state", "DeepSpeedZeroOptimizer.load_state_dict", False),  # whole names only
    ("BF16_Optimizer.*", "DeepSpeedZeroOptimizer.load_state_dict", False),
    ("Load_State_Dict", "DeepSpeedZeroOptimizer.load_state_dict", False),  # case-sensitive
    ("inner", "DeepSpeedEngine.load_checkpoint.inner", True),  # nested function: bare name
])
def test_function_matches(pattern, qualname, expected):
    assert function_matches(pattern, qualname) is expected


def test_reference_needs_the_same_file():
    assert reference_covers(ref(), site())
    assert not reference_covers(ref(source="deepspeed/runtime/zero/stage3.py"), site())
    assert not reference_covers({"url": "https://example.invalid"}, site())
    torch_site = site(file="serialization.py", function="load", package="torch")
    assert reference_covers(ref(source="torch/serialization.py", function="load"), torch_site)
    assert not reference_covers(ref(source="deepspeed/serialization.py", function="load"), torch_site)


def _rule(rule_id, references):
    return compile_rule({
        "id": rule_id, "category": "known_bug", "title": "t" * 10,
        "signature": {"patterns": [{"line": "x"}]}, "references": references,
    })


def test_coverage_counts_and_groups_by_file():
    a = site(line=30)
    b = site(function="DeepSpeedZeroOptimizer._load_global_state", line=20)
    c = site(file="serialization.py", function="_load", package="torch", line=5)
    rules = [_rule("DS-K002", [ref(function="DeepSpeedZeroOptimizer.*")]), _rule("DS-K001", [ref()])]
    covered = coverage([a, b, c], rules)
    assert [ids for _, ids in covered] == [["DS-K001", "DS-K002"], ["DS-K002"], []]
    files = per_file(covered)
    assert [(f.source, f.sites, f.covered, f.uncovered) for f in files] == [
        ("deepspeed/runtime/zero/stage_1_and_2.py", 2, 2, 0), ("torch/serialization.py", 1, 0, 1)]
    assert uncovered_by_file(covered) == {"torch/serialization.py": [c]}


def _rules_dir(tmp_path, function: str):
    rule = valid_rule(**{
        "source: deepspeed/runtime/state_dict_factory.py": "source: deepspeed/runtime/zero/stage_1_and_2.py",
        "function: SDLoaderBase.check_ckpt_list": f"function: '{function}'",
    })
    return rules_dir(tmp_path, {"DS-T001-test.yaml": rule})


@pytest.mark.parametrize("function", ["DeepSpeedZeroOptimizer.*", "merge_*", "_restore_[a-z]*", "*", "load_state_dict"])
def test_validator_accepts_function_globs(tmp_path, function):
    rules = load_rules(_rules_dir(tmp_path, function), use_cache=False)
    assert rules.rules[0].data["references"][0]["function"] == function


@pytest.mark.parametrize("function", ["DeepSpeedEngine.load_checkpoint()", "load_checkpoint(tag)", "engine.py:load", "a b"])
def test_validator_rejects_what_is_not_a_name_or_glob(tmp_path, function):
    with pytest.raises(BadRules) as caught:
        load_rules(_rules_dir(tmp_path, function), use_cache=False)
    message = caught.value.message
    assert "DS-T001-test.yaml:" in message and "is not a function name or glob" in message
    assert "without parentheses" in message


def test_every_load_site_is_covered_by_a_rule(load_sites, rules):
    sites, _ = load_sites
    covered = coverage(sites, rules.rules)
    missing = uncovered_by_file(covered)
    total = sum(len(items) for items in missing.values())
    report = "\n".join(f"{source} ({len(items)}):\n" + "\n".join(f"    {describe_site(s)}" for s in items)
                       for source, items in missing.items())
    assert total == 0, (f"{total} of {len(sites)} load-path raise sites are covered by no rule's references "
                         f"(rules/README.md: References and load-site coverage):\n{report}")
