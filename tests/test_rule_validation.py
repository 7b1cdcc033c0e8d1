"""A malformed rule fails loading with its file, line and a remedy."""

import textwrap

import pytest

from triage.errors import BadRules
from triage.kb import load_rules
from tests.rule_files import rules_dir as _rules_dir, valid_rule as _valid_rule


def _problems(directory) -> list[str]:
    with pytest.raises(BadRules) as info:
        load_rules(directory, use_cache=False)
    return info.value.problems


def test_valid_rule_loads(tmp_path):
    directory = _rules_dir(tmp_path, {"DS-T001-test.yaml": _valid_rule()})
    rules = load_rules(directory, use_cache=False)
    assert [r.id for r in rules.rules] == ["DS-T001"]


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    text = _valid_rule().replace("status: experimental", "status: [experimental")
    directory = _rules_dir(tmp_path, {"DS-T001-test.yaml": text})
    [problem] = _problems(directory)
    assert "DS-T001-test.yaml:" in problem and "invalid YAML" in problem
    line = int(problem.split(".yaml:")[1].split(":")[0])
    assert 3 <= line <= 5


def test_unknown_category_names_line_and_allowed_values(tmp_path):
    text = _valid_rule().replace("category: zero_stage_mismatch", "category: zero_stage")
    directory = _rules_dir(tmp_path, {"DS-T001-test.yaml": text})
    [problem] = _problems(directory)
    assert "DS-T001-test.yaml:4:" in problem
    assert "zero_stage_mismatch" in problem and "Use one of" in problem


def test_missing_field_and_misspelt_key(tmp_path):
    text = _valid_rule().replace("false_positives: none known", "false_positive: none known")
    directory = _rules_dir(tmp_path, {"DS-T001-test.yaml": text})
    problems = _problems(directory)
    assert any("lacks 'false_positives'" in p for p in problems)
    assert any("false_positive" in p and "spelling" in p for p in problems)


def test_bad_regex_points_at_the_pattern(tmp_path):
    text = _valid_rule().replace("- exception: AssertionError", "- exception: Assertion(Error")
    directory = _rules_dir(tmp_path, {"DS-T001-test.yaml": text})
    [problem] = _problems(directory)
    assert "DS-T001-test.yaml:10:" in problem and "bad regex" in problem


def test_a_line_pattern_without_fixed_text_is_refused_and_stream_says_so(tmp_path, cli):
    """`stream` prefilters raw bytes on each line pattern's literal: one with none (`\\d+ of \\d+`)
    is a lint error at its line, and stream given such a rules dir exits 4 naming the rule, not 70."""
    text = _valid_rule().replace("- exception: AssertionError\n", "- exception: AssertionError\n"
                                 + " " * 14 + "line: '\\d+ of \\d+'\n")
    directory = _rules_dir(tmp_path, {"DS-T001-test.yaml": text})
    [problem] = _problems(directory)
    assert "DS-T001-test.yaml:11:" in problem and "no fixed text of 4+ characters" in problem
    proc = cli("stream", "--rules", directory, stdin=b"x\n")
    assert proc.returncode == 4 and b"DS-T001" in proc.stderr and b"Traceback" not in proc.stderr


def test_writing_verify_command_is_refused(tmp_path):
    text = _valid_rule().replace("ls -la {ckpt}/{tag}", "rm -rf {ckpt}/{tag}")
    directory = _rules_dir(tmp_path, {"DS-T001-test.yaml": text})
    [problem] = _problems(directory)
    assert "read-only" in problem and ":13:" in problem


@pytest.mark.parametrize("command", [
    "git -C {ckpt} lfs ls-files",  # DS-X004's old step: the repository's alias `lfs` runs (issue 40)
    "git -c core.hooksPath=/dev/null -c core.fsmonitor= -C {ckpt} status",
    "cd {ckpt} && python -c 'import torch'",
    "make -C {ckpt} check",
    "python {ckpt}/zero_to_fp32.py {ckpt} /tmp/out",
    "pip install -e {ckpt}",
    "source {ckpt}/.envrc",
    "bash {ckpt}/check.sh",
])
def test_a_verify_command_that_runs_what_the_checkpoint_configures_is_refused(tmp_path, cli, command):
    """A verify step pasted on a hostile checkpoint must not run its git alias, hook, Makefile or
    script: `rules lint` names the line and says what to do instead."""
    text = _valid_rule().replace("ls -la {ckpt}/{tag}", command)
    directory = _rules_dir(tmp_path, {"DS-T001-test.yaml": text})
    [problem] = [p for p in _problems(directory) if "read-only" not in p]  # `pip install` also writes
    assert "DS-T001-test.yaml:13:" in problem and "checkpoint's own commands" in problem and "ds-triage probe" in problem
    result = cli("rules", "lint", "--rules", directory)
    assert result.returncode == 4 and b"DS-T001-test.yaml:13:" in result.stderr


def test_unknown_placeholder(tmp_path):
    text = _valid_rule().replace("{ckpt}/{tag}", "{checkpoint}")
    [problem] = _problems(_rules_dir(tmp_path, {"DS-T001-test.yaml": text}))
    assert "checkpoint" in problem and "placeholder" in problem


def test_duplicate_ids_across_files(tmp_path):
    directory = _rules_dir(tmp_path, {
        "DS-T001-a.yaml": _valid_rule(),
        "DS-T001-b.yaml": _valid_rule(**{"A test rule about a bare assertion": "Another title for the same id",
                                        "exception: AssertionError": "exception: KeyError"}),
    })
    problems = _problems(directory)
    assert any("same id" in p for p in problems)


def test_a_special_case_must_be_another_existing_rule(tmp_path):
    directory = _rules_dir(tmp_path, {
        "DS-T001-a.yaml": _valid_rule(**{"signature:": "special_cases: [DS-T002, DS-T009]\n        signature:"}),
        "DS-T002-b.yaml": _valid_rule("DS-T002", **{"A test rule about a bare assertion": "A narrower test rule",
                                                   "exception: AssertionError": "exception: KeyError",
                                                   "signature:": "special_cases: [DS-T002]\n        signature:"}),
    })
    problems = sorted(_problems(directory))
    assert len(problems) == 2, problems
    assert "DS-T001-a.yaml:8: special case DS-T009 is no rule" in problems[0]
    assert "DS-T002-b.yaml:8: special case DS-T002 is the rule itself" in problems[1]


def test_duplicate_yaml_key(tmp_path):
    text = _valid_rule().replace("status: experimental", "status: experimental\n        status: stable")
    [problem] = _problems(_rules_dir(tmp_path, {"DS-T001-test.yaml": text}))
    assert "duplicate key 'status'" in problem and ":4:" in problem


def test_id_must_match_file_name(tmp_path):
    [problem] = _problems(_rules_dir(tmp_path, {"DS-T002-test.yaml": _valid_rule()}))
    assert "does not match the file name" in problem


def test_examples_required_both_ways(tmp_path):
    text = _valid_rule().replace("expect: no-match", "expect: match")
    [problem] = _problems(_rules_dir(tmp_path, {"DS-T001-test.yaml": text}))
    assert "no negative example" in problem


def test_not_utf8(tmp_path):
    directory = _rules_dir(tmp_path, {})
    (directory / "DS-T001-test.yaml").write_bytes(b"id: DS-T001\ntitle: \xff\xfe\n")
    [problem] = _problems(directory)
    assert "not UTF-8" in problem


def test_cli_lint_reports_and_exits_4(tmp_path, cli):
    text = _valid_rule().replace("category: zero_stage_mismatch", "category: nope")
    directory = _rules_dir(tmp_path, {"DS-T001-test.yaml": text})
    result = cli("rules", "lint", "--rules", directory)
    assert result.returncode == 4
    err = result.stderr.decode()
    assert "DS-T001-test.yaml:4:" in err and "Traceback" not in err


def test_cache_is_keyed_by_content(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    directory = _rules_dir(tmp_path, {"DS-T001-test.yaml": _valid_rule()})
    first = load_rules(directory)
    assert list((tmp_path / "cache" / "ds-triage").glob("rules-*.marshal"))
    # A cached result must never hide a newly broken rule.
    (directory / "DS-T001-test.yaml").write_text(textwrap.dedent(_valid_rule()).replace("status: experimental", "status: nope"))
    with pytest.raises(BadRules):
        load_rules(directory)
    assert first.rules[0].id == "DS-T001"


def _with_line_condition(pattern: str) -> tuple[str, int]:
    """The valid rule with a `line:` condition; (text, the line it stands on)."""
    text = textwrap.dedent(_valid_rule()).replace(
        "  - exception: AssertionError\n", f"  - exception: AssertionError\n      line: '{pattern}'\n")
    return text, text.splitlines().index(f"      line: '{pattern}'") + 1


def test_lint_rejects_a_regex_of_super_linear_time_naming_file_and_line(tmp_path, cli):
    # Nested quantifiers over the same characters backtrack exponentially in Python's re; the
    # lookahead keeps the pattern there (RE2 has no lookarounds).
    text, line = _with_line_condition(r"Unable to load(\s*\S+)*:(?! )")  # a literal for stream
    directory = _rules_dir(tmp_path, {"DS-T001-test.yaml": text})
    result = cli("rules", "lint", "--rules", directory)
    assert result.returncode == 4
    err = result.stderr.decode()
    assert f"DS-T001-test.yaml:{line}: line regex" in err and "super-linear" in err and "Traceback" not in err
    load_rules(directory, use_cache=False)  # classify does not time regexes: it only compiles them


def test_lint_accepts_what_re2_runs_in_linear_time_and_rejects_it_on_re(tmp_path, cli):
    from triage.kb.regex import compile_pattern

    if not hasattr(compile_pattern("a"), "translated"):
        pytest.skip("google-re2 is not installed")
    text, line = _with_line_condition(r"stall (a+)+$")  # with a literal for stream
    directory = _rules_dir(tmp_path, {"DS-T001-test.yaml": text})
    assert cli("rules", "lint", "--rules", directory).returncode == 0
    on_re = cli("rules", "lint", "--rules", directory, env={"DS_TRIAGE_REGEX_ENGINE": "re"})
    assert on_re.returncode == 4 and f"DS-T001-test.yaml:{line}: line regex /stall (a+)+$/" in on_re.stderr.decode()
