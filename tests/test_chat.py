"""`ds-triage chat`, the conversation as plain function calls: `Conversation.handle(message)`
on real corpus logs, with the questions, the answers' checks, the slash commands, and the
read-only command runner. No terminal here (tests/test_chat_app.py drives the prompt)."""

import pytest

from tests.conftest import corpus_log
from triage.chat import commands, questions, readonly
from triage.chat.conversation import Conversation
from triage.chat.session import Session
from triage.classify.classifier import classify

ZERO3_LOG = "cases/job-zero3-train-then-stage2-load.log"  # its save lines name ZeRO-3 shards: DS-Z001 first
TP_LOG = "cases/zero_to_fp32-tp2-z1-fp32-unsupported.log"  # its log prints no world size


@pytest.fixture
def chat(rules):
    return Conversation(Session(rules))


def ranked_ids(conversation):
    return [(h.rule.id, h.rule.category) for h, _ in conversation.session.ranked()]


@pytest.mark.parametrize("name", [ZERO3_LOG, TP_LOG, "cases/tp2-saved-load-dp2.log",
                                  "cases/zero2-dp2-optim-shard-deleted.log", "cases/negative-oom.log"])
def test_a_pasted_log_gets_classifys_ranked_causes_with_one_line_of_why(chat, rules, name):
    text = corpus_log(name)
    out = chat.handle(text).text
    expected = [(h.rule.id, h.rule.category) for h in classify(text, rules=rules).hypotheses]
    assert expected and ranked_ids(chat) == expected
    for number, (rule_id, category) in enumerate(expected, start=1):
        category = "not a checkpoint-loading failure" if category == "unknown" else category
        line = next(line for line in out.splitlines() if line.strip().startswith(f"{number}. {rule_id} "))
        assert category in line
        assert out.splitlines()[out.splitlines().index(line) + 1].strip().startswith("why: line ")


def test_a_non_checkpoint_failure_asks_for_no_checkpoint(chat):
    out = chat.handle(corpus_log("cases/negative-oom.log")).text
    assert "not a checkpoint-loading failure" in out
    assert chat.pending is None and "Where is the checkpoint?" not in out


def test_it_asks_one_fact_at_a_time_and_checks_each_answer(chat, tmp_path):
    out = chat.handle(corpus_log(TP_LOG)).text
    assert out.rstrip().endswith("(or 'skip')") and "Where is the checkpoint?" in out
    assert sum(text.split("?")[0] in out for text in questions.TEXT.values()) == 1  # one question at a time
    assert chat.pending.fact == "ckpt" and chat.prompt() == "checkpoint> "
    missing = tmp_path / "nowhere"
    out = chat.handle(str(missing)).text
    assert f"That does not work: no such file or directory: {missing}." in out and chat.pending.fact == "ckpt"
    assert "Which ds_config" in chat.handle("skip").text and chat.pending.fact == "config"
    (tmp_path / "bad.json").write_text("{not json")
    assert "not valid JSON" in chat.handle(str(tmp_path / "bad.json")).text and chat.pending.fact == "config"
    assert "is a directory" in chat.handle(str(tmp_path)).text
    out = chat.handle("skip").text
    assert "What world size are you loading with?" in out and chat.pending.fact == "world_size"
    assert chat.prompt() == "world size> "
    assert "not a whole number: 'two'" in chat.handle("two").text
    assert "at least 1: got 0" in chat.handle("0").text and chat.pending.fact == "world_size"
    out = chat.handle("4").text
    assert out.startswith("World size: 4.") and chat.session.facts["world_size"] == 4
    assert chat.pending is None  # nothing more to ask, and no checkpoint to offer probing
    assert questions.missing(chat.session) == []  # skipped facts are not asked again
    assert "world size  4 (you)" in chat.handle("/set").text


def test_parse_answer_bounds():
    assert questions.parse_answer("stage", " 3 ") == 3
    for fact, answer, message in [("stage", "5", "0, 1, 2 or 3"), ("world_size", "-2", "at least 1"),
                                  ("stage", "two", "not a whole number")]:
        with pytest.raises(questions.Invalid, match=message):
            questions.parse_answer(fact, answer)


def test_slash_commands_come_from_the_registry_and_help_lists_them_all(chat):
    out = chat.handle("/help").text
    for name, command in commands.REGISTRY.items():
        assert f"  {command.usage}" in out and command.help in out
    assert {"/probe", "/why", "/rules", "/runbook", "/fix", "/export", "/reset", "/quit"} <= set(commands.REGISTRY)
    assert "Unknown command /frobnicate" in chat.handle("/frobnicate").text
    assert chat.handle("/quit").done


def test_why_fix_rules_runbook_reset(chat, tmp_path):
    assert "No causes yet" in chat.handle("/why").text
    chat.handle(corpus_log(ZERO3_LOG))
    out = chat.handle("/why 1").text
    assert "line 372: AssertionError" in out and "Not probed yet" in out
    assert "1 to 3" in chat.handle("/why 9").text
    out = chat.handle("/fix").text
    assert "Set zero_optimization.stage to 3 in the loading job's ds_config [safe]" in out
    assert "[UNSAFE: the optimizer and scheduler state are dropped" in out
    # no checkpoint given: the one the log's save lines name
    assert "$ ds-triage repair config /tmp/ds-triage-corpus/job-zero3-train-then-stage2-load" in out
    assert "DS-Z001" in chat.handle("/rules zero_stage_mismatch").text
    assert "No category 'nope'" in chat.handle("/rules nope").text
    out = chat.handle("/runbook size mismatch for").text
    assert "HOW TO VERIFY" in out and "FIX" in out
    assert "(Still waiting for the checkpoint" in out  # the question stays open across commands
    assert chat.handle("/reset").text.startswith("Started over")
    assert chat.session.report is None and chat.pending is None and "No causes yet" in chat.handle("/fix").text


def test_run_refuses_what_is_not_read_only_and_asks_before_running_the_rest(rules, tmp_path):
    ran = []
    chat = Conversation(Session(rules, given={"ckpt": str(tmp_path)}),
                        run_command=lambda c: ran.append(c) or readonly.run(c, readonly.Context.of(chat.session)))
    chat.handle(corpus_log(ZERO3_LOG))
    chat.handle("skip")
    out = chat.handle("/run 7").text  # grep '"stage"' "$DS_CONFIG": no config given
    assert 'Not run: it still has "$DS_CONFIG" in it' in out and ran == []
    assert "Not run: `rm` is not on the chat's list" in chat.handle(f"/run rm -rf {tmp_path}").text
    assert "the chat runs one program with no shell" in chat.handle(f"/run ls {tmp_path}; rm -rf {tmp_path}").text
    (tmp_path / "notes.txt").write_text("saved at step 3\n")  # in the checkpoint: cat may show it
    out = chat.handle(f"/run cat {tmp_path}/notes.txt").text
    assert "It only reads. [y/N]" in out and ran == [] and chat.prompt() == "[y/N]> "
    assert "Not done." in chat.handle("").text and ran == []  # the default is no
    chat.handle(f"/run cat {tmp_path}/notes.txt")
    assert "Please answer yes or no" in chat.handle("maybe").text
    out = chat.handle("yes").text
    assert ran == [f"cat {tmp_path}/notes.txt"] and "  saved at step 3" in out
    assert chat.session.commands[0].output == "saved at step 3\n" and chat.session.commands[0].returncode == 0
    assert tmp_path.exists()


def test_export_refuses_to_overwrite_without_a_yes(chat, tmp_path):
    chat.handle(corpus_log(ZERO3_LOG))
    report = tmp_path / "incident.md"
    report.write_text("keep me\n")
    out = chat.handle(f"/export {report}").text
    assert f"{report} exists. Replace it" in out
    assert "Not done." in chat.handle("no").text and report.read_text() == "keep me\n"
    chat.handle(f"/export {report}")
    assert "Wrote the incident report" in chat.handle("y").text
    text = report.read_text()
    assert text.startswith("# Incident report: zero_stage_mismatch [DS-Z001] (not confirmed on the checkpoint)")
    assert ">>372 | [rank0]: AssertionError" in text  # the deciding line, marked, with its number in the log
    assert "| 1 | DS-Z001 " in text and "not probed" in text
    assert "Where is the checkpoint" not in text


def test_unreadable_paste_is_a_message_not_an_exit(chat):
    out = chat.handle("\x00\x01\x02\x03\x04\x05\x06\x07\x08" * 50 + "\nx\ny").text
    assert out.startswith("error: the paste does not look like a text log")
    assert chat.session.report is None



def test_excerpt_shows_every_deciding_line_even_far_apart():
    from triage.chat.export import MAX_EXCERPT, excerpt

    log = "\n".join(f"line {n}" for n in range(1, 1001))
    out = excerpt(log, {10, 500, 990})
    assert [row for row in out if row.startswith(">>")] == [">> 10 | line 10", ">>500 | line 500", ">>990 | line 990"]
    assert sum(row.strip() == "..." for row in out) == 3  # before the first window and between them
    assert len([row for row in out if "|" in row]) <= MAX_EXCERPT
    near = excerpt(log, {100, 103})  # close lines share one window
    assert sum(row.strip() == "..." for row in near) == 1 and ">>103 | line 103" in near
