"""The deciding question (triage/evidence/question.py): asked when the open causes differ in kind, in
the seeds' order path -> permission -> integrity -> version -> config, never for what the log or a
paste already gave; on real corpus logs."""

from tests.conftest import corpus_log
from triage.chat.conversation import Conversation
from triage.chat.session import Session
from triage.classify.classifier import classify
from triage.evidence import question
from triage.probe.target import from_args

FULL = "cases/job-zero3-train-then-stage2-load.log"


def bare_trace() -> str:
    lines = corpus_log(FULL).splitlines()
    end = lines.index("[rank0]: AssertionError")
    start = max(i for i in range(end) if "Traceback (most recent call last)" in lines[i])
    return "\n".join(lines[start:end + 1])


def test_the_bare_assert_gets_the_listing_first_with_what_each_answer_means(rules):
    text = bare_trace()
    report = classify(text, rules=rules)
    q = question.for_report(report, text)
    assert q.kind == "listing" and q.phase == "path" and "ls -la CKPT CKPT/TAG" in q.command
    assert any("zero_pp_rank" in m for m in q.means) and any("missing file" in m for m in q.means)
    assert any(p.startswith("CKPT:") for p in q.placeholders)  # the log names no dir: say what CKPT is


def test_paths_the_log_gives_are_filled_in_and_its_facts_not_asked_again(rules):
    text = corpus_log(FULL)
    q = question.for_report(classify(text, rules=rules), text)
    assert "/tmp/ds-triage-corpus/job-zero3-train-then-stage2-load" in q.command and "CKPT" not in q.command
    target = from_args(None, None, None, text)
    assert target.stage is not None and target.ds_version  # the log printed both
    later = question.deciding(["zero_stage_mismatch", "version_incompatible"], target, {"listing", "namei", "head"})
    assert later.kind == "inspect"  # neither pip show nor the ds_config: the log gave them; the saved stage it did not
    assert question.deciding(["zero_stage_mismatch", "version_incompatible"], target,
                             {"listing", "namei", "head", "inspect"}) is None


def test_one_category_or_a_pasted_kind_asks_nothing_more():
    assert question.deciding(["missing_file", "missing_file"]) is None
    assert question.deciding(["missing_file", "permission_denied"]).kind == "listing"
    assert question.deciding(["missing_file", "permission_denied"], seen={"listing"}).kind == "namei"


def test_at_the_prompt_it_is_one_question_with_two_ways_to_answer(rules):
    chat = Conversation(Session(rules))
    out = chat.handle(bare_trace()).text
    assert out.count("To tell these causes apart") == 1 and "Where is the checkpoint?" in out
    assert chat.pending.fact == "ckpt"
    again = chat.handle("/verify").text
    assert "To tell these causes apart" not in again  # asked once


def test_a_question_help_and_quit_typed_as_words_are_read_for_what_they_mean(rules):
    chat = Conversation(Session(rules))
    assert "Paste the failing job's log" in chat.handle("what should I check first?").text
    assert chat.session.report is None  # not appended to the log
    chat.handle(bare_trace())
    out = chat.handle("what should I check first?").text
    assert "That does not work" not in out and "ls -la CKPT CKPT/TAG" in out  # not taken for a path
    assert "/probe" in chat.handle("help").text
    assert chat.handle("quit").done
