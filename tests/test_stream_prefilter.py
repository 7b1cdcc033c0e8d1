"""The prefilter's cheap answers from raw bytes never contradict the rule regexes."""

import pytest

from tests import stream_envelopes as env
from triage.stream.literals import looks_behind
from triage.stream.prefilter import Prefilter, _rule_text


@pytest.mark.parametrize("pattern, behind", [
    (r"Begin Load checkpoint from", False),
    (r"step=\d+, skipped=\d+", False),
    (r"^\s*assert len", True),
    (r"\bmp_rank_\d+_model_states\.pt", True),
    (r"(?<=x)y", True),
    (r"in _create_param_mapping$", False),
    (r"Unsupported operand (?!118\b)\d+", True),  # any \b counts: cautious
    (r"a(?:b|(?:c|^d))", True),
])
def test_what_a_regex_looks_at_before_its_match(pattern, behind):
    assert looks_behind(pattern) is behind


def test_raw_answers_agree_with_the_rule_regexes_on_corpus_lines(rules):
    """Every context check on every line of some real logs: a raw 'no' (from the text, or from
    its undecoded ASCII bytes) is never a line the check matches once its prefixes are cut."""
    prefilter = Prefilter(rules.rules)
    lines = env.case_lines("zero3-saved-stage2-load-dp2") + env.clean_lines("train-long-z2-dp2-fp32")
    lines += env.case_lines("pp2-saved-load-pp1")
    everything = frozenset(range(len(prefilter.context)))
    said_no = 0
    for line in lines:
        truth = {i for i in everything if prefilter.context[i].regex.search(_rule_text(line))}
        assert set(prefilter.context_hits(line, None)) == truth
        assert {i for i in everything if prefilter.check_matches(i, line)} == truth
        raw = line.encode()
        if raw.isascii() and b"\x1b" not in raw:
            may = {i for i in everything if prefilter.may_match_ascii(i, b"x\n" + raw + b"\n", 2, 2 + len(raw))}
            assert truth <= may
            said_no += len(everything - may)
    assert said_no > 1000

