"""What people paste of a real log still parses and matches (issue 17): the last lines of a
traceback whose header was cut off keep their frames, and the fragments the rules were widened
for (the message without its exception type, the exception line without its frames) are cut
from the rules' own real examples, never written by hand."""

import pytest

from tests.conftest import ROOT
from triage.classify.classifier import classify
from triage.eval.pastes import log_lines
from triage.logs.inputs import decode_log
from triage.logs.parse import parse


def _log(name: str) -> str:
    path = ROOT / name
    return decode_log(path.read_bytes(), str(path)).text


@pytest.mark.parametrize("name", ["corpus/cases/zero2-dp1-adamw-saved-sgd-load.log",
                                  "corpus/cases/zero3-dp2-model-hidden-changed.log",
                                  "corpus/cases/ds_to_universal-zero2-dp2-missing-shard.log"])
@pytest.mark.parametrize("keep", [5, 20])
def test_the_last_lines_of_a_traceback_keep_their_frames(name, keep):
    text = _log(name)
    whole = parse(text)[0].primary
    lines = log_lines(text)
    header = max(i for i in range(whole.log_line) if "Traceback (most recent call last)" in lines[i])
    tail = lines[max(header + 1, whole.log_line - keep):whole.log_line]  # the header cut off
    cut = parse("\n".join(tail))[0].primary
    shown = [(f.file, f.line, f.function) for f in whole.frames][-len(cut.frames):]
    assert cut.type == whole.type and cut.frames and [(f.file, f.line, f.function) for f in cut.frames] == shown
    assert not parse("\n".join(tail))[0].chains[0].bare


def _paste_patterns(rule):
    """The patterns a rule has for pastes (their name says "(a paste"): a `line` pattern reads the
    message with its exception type cut off, an exception-scoped one the exception line alone."""
    return [p for p in rule.data["signature"]["patterns"] if "(a paste" in p.get("name", "")]


def _fragments(text):
    """{kind: (the text pasted, what the pattern's regex reads of it)}"""
    exc = parse(text)[0].primary
    first = exc.message.splitlines()[0] if exc and exc.message else ""
    return {"line": (first, first), "exception": (f"{exc.type}: {first}", first)} if first else {}


def test_paste_patterns_match_fragments_cut_from_the_rules_real_examples(rules):
    import re

    unexercised, wrong = [], []
    for rule in rules.rules:
        for pattern in _paste_patterns(rule):
            kind = "line" if "line" in pattern else "exception"
            regex = re.compile(pattern.get("line") or pattern["message"], re.M)
            used = 0
            for example in rule.data["examples"]:
                if example["expect"] != "match" or "file" not in example:
                    continue
                fragment, read = _fragments(_log(example["file"])).get(kind, (None, None))
                if not fragment or not regex.search(read):
                    continue
                used += 1
                ranked = [h.rule.id for h in classify(fragment, rules=rules).hypotheses]
                if ranked[:1] != [rule.id]:
                    wrong.append(f"{rule.id} {example['file']}: {fragment[:90]!r} -> {ranked}")
            if not used:
                unexercised.append(f"{rule.id}: {pattern['name']}")
    assert not unexercised, "paste patterns no real example's fragment exercises:\n" + "\n".join(unexercised)
    assert not wrong, "\n".join(wrong)


def test_rules_have_paste_patterns_for_the_fragments_issue_17_names(rules):
    # torch's zip-archive reader error without `RuntimeError:`, [Errno 2] / [Errno 13] lines without their type
    assert {r.id for r in rules.rules if _paste_patterns(r)} >= {"DS-X001", "DS-F002", "DS-A001"}
