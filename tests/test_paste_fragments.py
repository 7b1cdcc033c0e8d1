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
    """{kind: [(the text pasted, what the pattern's regex reads of it)]}: the message's first line
    with or without its type, and its last line (what a paste that kept only the end shows)."""
    exc = parse(text)[0].primary
    lines = [line for line in exc.message.splitlines() if line.strip()] if exc and exc.message else []
    if not lines:
        return {}
    first, last = lines[0], lines[-1].strip()
    return {"line": [(first, first)] + ([(last, last)] if last != first else []),
            "exception": [(f"{exc.type}: {first}", first)]}


def _example_text(example):
    """A match example's real log: a corpus file, or the inline capture."""
    return _log(example["file"]) if "file" in example else example.get("log") or ""


def test_paste_patterns_match_fragments_cut_from_the_rules_real_examples(rules):
    import re

    unexercised, wrong = [], []
    for rule in rules.rules:
        for pattern in _paste_patterns(rule):
            kind = "line" if "line" in pattern else "exception"
            regex = re.compile(pattern.get("line") or pattern["message"], re.M)
            used = 0
            for example in rule.data["examples"]:
                if example["expect"] != "match":
                    continue
                for fragment, read in _fragments(_example_text(example)).get(kind, []):
                    if not regex.search(read):
                        continue
                    used += 1
                    ranked = [h.rule.id for h in classify(fragment, rules=rules).hypotheses]
                    if ranked[:1] != [rule.id]:
                        where = example.get("file") or "inline log"
                        wrong.append(f"{rule.id} {where}: {fragment[:90]!r} -> {ranked}")
            if not used:
                unexercised.append(f"{rule.id}: {pattern['name']}")
    assert not unexercised, "paste patterns no real example's fragment exercises:\n" + "\n".join(unexercised)
    assert not wrong, "\n".join(wrong)


def test_rules_have_paste_patterns_for_the_fragments_issue_17_names(rules):
    # torch's zip-archive reader error without `RuntimeError:`, [Errno 2] / [Errno 13] lines without their type
    assert {r.id for r in rules.rules if _paste_patterns(r)} >= {"DS-X001", "DS-F002", "DS-A001"}


@pytest.mark.parametrize("name, rule_id", [
    ("corpus/cases/zero2-saved-stage0-load-dp1.log", "DS-Z003"),  # 'NoneType' object has no attribute 'copy'
    ("corpus/cases/zero3-dp2-model-hidden-changed.log", "DS-M005"),  # The size of tensor a (...) must match ...
])
@pytest.mark.parametrize("cut", ["exception line", "traceback without frames"])
def test_a_pattern_whose_frames_the_paste_cut_still_fires_weaker(rules, name, rule_id, cut):
    text = _log(name)
    whole = classify(text, rules=rules)
    exc = whole.incident.primary
    line = log_lines(text)[exc.log_line - 1]
    paste = line if cut == "exception line" else f"Traceback (most recent call last):\n{line}"
    found = {h.rule.id: h for h in classify(paste, rules=rules).hypotheses}
    full = {h.rule.id: h for h in whole.hypotheses}
    assert rule_id in full and rule_id in found
    assert found[rule_id].confidence < full[rule_id].confidence
    assert "not in the paste" in found[rule_id].evidence[0].why


def test_a_message_without_words_of_its_own_does_not_relax(rules):
    # DS-O001 reads `KeyError: 'step'` through the frames of torch's optimizer; any KeyError
    # says as much without them, so the exception line alone gives nothing
    text = _log("corpus/cases/zero2-dp1-sgd-saved-adamw-load.log")
    exc = parse(text)[0].primary
    assert exc.message == "'step'"
    assert "DS-O001" in [h.rule.id for h in classify(text, rules=rules).hypotheses]
    assert "DS-O001" not in [h.rule.id for h in classify(f"{exc.type}: {exc.message}", rules=rules).hypotheses]


def test_a_key_only_an_optimizer_class_reads_names_the_cause_weaker(rules):
    # `KeyError: 'momentum'`: a hyperparameter SGD reads from every param group and AdamW never
    # writes; DS-O001's paste pattern names it without the frames, below the whole traceback
    text = _log("corpus/cases/zero2-dp1-adamw-saved-sgd-load.log")
    exc = parse(text)[0].primary
    whole = classify(text, rules=rules).top
    alone = classify(f"{exc.type}: {exc.message}", rules=rules).top
    assert whole.rule.id == alone.rule.id == "DS-O001" and alone.confidence < whole.confidence


def test_a_whole_traceback_is_never_read_as_cut(rules):
    # the same exception with its frames and header: the frames are all there, nothing is relaxed
    text = _log("corpus/cases/zero2-dp1-adamw-saved-sgd-load.log")
    assert not any(e.cut for chain in parse(text)[0].chains for e in chain.exceptions)
    assert all("not in the paste" not in e.why for h in classify(text, rules=rules).hypotheses for e in h.evidence)
