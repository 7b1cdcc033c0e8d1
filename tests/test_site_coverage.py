"""Which rules cover which raise sites on the checkpoint load path (triage.kb.coverage)."""

import pytest

from tests.rule_files import rules_dir, valid_rule
from triage.kb.coverage import (coverage, describe_site, function_matches, literal_words, named_only, per_file,
                                 reference_covers, rules_covering, rules_naming, uncovered_by_file)
from triage.errors import BadRules
from triage.kb import load_rules
from triage.kb.model import compile_rule
from triage.kb.sites import Site, site_key


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


def _rule(rule_id, references, pattern=None):
    return compile_rule({
        "id": rule_id, "category": "known_bug", "title": "t" * 10,
        "signature": {"patterns": [pattern or {"message": "^boom "}]}, "references": references,
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


@pytest.mark.parametrize("pattern, covers", [
    ({"message": "^boom x7$"}, True),  # the template, its placeholder filled
    ({"exception": "RuntimeError", "message": "boom"}, True),
    ({"exception": "ValueError", "message": "boom"}, False),  # another type: another raise
    ({"message": "bang"}, False),  # another message of the same function
    ({"message": "."}, False),  # matches any text: names no message
    ({"line": "boom"}, False),  # a log line, not this raise
    ({"exception": "AssertionError", "frame": {"file": "zero/stage_1_and_2.py", "code": r"RuntimeError\("}}, True),
    ({"exception": "AssertionError", "frame": {"file": "zero/stage3.py", "code": r"RuntimeError\("}}, False),
])
def test_a_rule_covers_a_site_only_where_it_names_its_message_or_raise(pattern, covers):
    """Issue 42, item 5: naming the function is not enough; the rule must describe this raise."""
    rule = _rule("DS-K001", [ref()], pattern)
    assert rules_naming(site(), [rule]) == ["DS-K001"]
    assert rules_covering(site(), [rule]) == (["DS-K001"] if covers else [])


@pytest.mark.parametrize("pattern, covers", [
    ({"exception": "AssertionError", "message": "^$", "frame": {"file": "runtime/state_dict_factory.py",
                                                                 "function": "check_ckpt_list"}}, True),
    ({"exception": "AssertionError", "message": "^$", "frame": {"file": "runtime/state_dict_factory.py",
                                                                 "function": "merge_state_dict"}}, False),
    ({"exception": "AssertionError", "message": "^$"}, False),  # no frame: any bare assert anywhere
    ({"exception": "AssertionError", "message": "count", "frame": {"function": "check_ckpt_list"}}, False),
])
def test_a_bare_assert_is_named_by_an_empty_message_in_its_function(pattern, covers):
    bare = Site("deepspeed", "runtime/state_dict_factory.py", "SDLoaderBase.check_ckpt_list", 168, "assert",
                "AssertionError", None, "assert len(self.ckpt_list) > 0")
    rule = _rule("DS-K001", [ref("deepspeed/runtime/state_dict_factory.py", "SDLoaderBase.check_ckpt_list")], pattern)
    assert rules_covering(bare, [rule]) == (["DS-K001"] if covers else [])


def test_a_regex_asking_for_one_value_of_a_placeholder_covers_the_site():
    """`can't find \\*_model_states\\.pt files` explains `can't find {glob_pattern} files in directory`
    when the glob is the model states': the regex's own words are tried as the value."""
    s = Site("deepspeed", "utils/zero_to_fp32.py", "get_checkpoint_files", 1, "raise", "FileNotFoundError",
             "can't find {glob_pattern} files in directory '{checkpoint_dir}'", "raise FileNotFoundError(...)")
    rule = _rule("DS-K001", [ref("deepspeed/utils/zero_to_fp32.py", "get_checkpoint_files")],
                 {"message": r"^can't find (?:\*_model_states\.pt files|model states file at)"})
    assert "*_model_states.pt" in literal_words(rule.patterns[0].conditions.message.pattern)
    assert rules_covering(s, [rule]) == ["DS-K001"]


def test_the_gradient_clipping_check_is_not_covered_by_the_version_rules_of_its_function(load_sites, rules):
    """The issue's example: `_load_global_state` refuses a checkpoint saved with gradient clipping
    loaded with compute_grad_norm=false; DS-V001/DS-V002 name that function for version checks."""
    sites, _ = load_sites
    clip = next(s for s in sites if s.function == "DeepSpeedZeroOptimizer._load_global_state"
                and s.message and s.message.startswith("Cannot load a checkpoint with gradient clipping"))
    assert {"DS-V001", "DS-V002", "DS-C204"} <= set(rules_naming(clip, rules.rules))
    assert rules_covering(clip, rules.rules) == ["DS-C204"]  # its message regex is this message


def test_named_only_lists_the_rules_that_name_an_uncovered_sites_function(load_sites, rules):
    sites, _ = load_sites
    covered = coverage(sites, rules.rules)
    named = named_only(covered, rules.rules)
    assert named and all(not ids for site, ids in covered if site_key(site) in named)
    moe = next(s for s in sites if s.message and s.message.startswith("Expert checkpoint file is corrupt: key"))
    assert "DS-V102" in named[site_key(moe)]  # DS-V102 names load_moe_state_dict for its format checks


def test_a_rule_may_name_a_site_of_every_project_the_catalogue_reads():
    """rules/schema.json's `source` accepts `<project>/<file>` for each project of triage.kb.projects."""
    import json
    import re

    from tests.conftest import ROOT
    from triage.kb.projects import PYPI, REPOSITORIES

    schema = json.loads((ROOT / "rules" / "schema.json").read_text())
    pattern = schema["properties"]["references"]["items"]["properties"]["source"]["pattern"]
    for project in ("deepspeed", "torch", *PYPI, *REPOSITORIES):
        assert re.match(pattern, f"{project}/some/file.py"), project
