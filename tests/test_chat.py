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


# ---------------------------------------------------------------------- a conversation, not a form (issue 43)

@pytest.fixture(scope="module")
def z3():
    from tests.probe_checkpoints import layout_base

    return str(layout_base("z3-dp2-fp32"))


def test_a_question_help_and_quit_without_a_slash_are_not_log_text(chat):
    out = chat.handle("what should I check first?").text
    assert "Paste the failing job's log (or its traceback) first" in out and chat.session.report is None
    assert "/verify [N]" in chat.handle("help").text and chat.session.report is None
    chat.handle(corpus_log(ZERO3_LOG))
    assert chat.pending.fact == "ckpt"
    out = chat.handle("what now").text  # at the checkpoint question: asked, not a path
    assert "What to check first:" in out and "no such file or directory" not in out
    assert chat.pending.fact == "ckpt" and chat.session.log.count("what now") == 0
    assert chat.handle("quit").done


def test_verify_does_not_offer_again_a_listing_already_pasted(chat, z3):
    from tests.test_evidence_chat import listing, trace

    chat.handle(trace())
    before = chat.handle("/verify").text
    assert "ls -la" in before and "Already answered" not in before
    chat.handle(listing(z3))  # the real `cat latest; echo; ls -la ROOT TAG` of a ZeRO-3 baseline
    out = chat.handle("/verify").text
    offered, answered = out.split("Already answered by what you pasted (not asked again):")
    assert "ls -la" not in offered and "cat " not in offered  # neither the listing nor `cat latest`
    assert "] id\n" in offered  # what was not pasted is still offered
    assert '] ls -la "$CKPT" "$CKPT"/"$TAG": the pasted ls -l output' in answered
    assert '] cat "$CKPT"/latest: the pasted cat latest output' in answered


def test_answering_the_stage_question_shows_the_new_ranking_and_what_changed(rules, z3):
    import subprocess

    from tests.test_evidence_chat import TAG, trace

    chat = Conversation(Session(rules))
    chat.handle(trace())
    tag_only = subprocess.run(["ls", "-la", f"{z3}/{TAG}"], capture_output=True, text=True, check=True).stdout
    chat.handle(f"$ ls -la {z3}/{TAG}\n" + tag_only)  # the tag alone: DS-Z001 not decided yet
    for _ in range(6):  # the questions before the stage's, skipped
        if chat.pending is not None and chat.pending.fact == "stage":
            break
        chat.handle("skip")
    assert chat.pending.fact == "stage" and chat.prompt() == "ZeRO stage> "
    out = chat.handle("2").text
    assert out.startswith("ZeRO stage: 2.\n")
    ranking = out.split("Confirmed:\n", 1)[1]
    assert ranking.startswith("  1. DS-Z001 zero_stage_mismatch")  # the ranking, shown again, DS-Z001 first
    assert "What changed:\n  DS-Z001: open -> confirmed" in out


def test_run_output_updates_the_ranking_with_the_checkpoint_here(rules, z3):
    chat = Conversation(Session(rules, given={"ckpt": z3}))
    from tests.test_evidence_chat import trace

    chat.handle(trace())
    listed = next(s.number for s in chat.session.steps() if s.command.startswith("ls -la") and s.command.count(z3) == 2)
    assert "It only reads. [y/N]" in chat.handle(f"/run {listed}").text
    out = chat.handle("yes").text
    assert "zero_pp_rank_1_mp_rank_00_model_states.pt" in out  # the real output, then what it decides
    assert "Verdict: zero_stage_mismatch [DS-Z001]" in out and "What changed:\n  DS-Z001: open -> confirmed" in out


def test_replies_wrap_between_words_and_break_only_a_word_longer_than_a_row(chat, z3):
    from tests.test_evidence_chat import listing, trace
    from triage.chat.wrap import width_of, wrap

    chat.handle(trace())
    text = chat.handle(listing(z3)).text  # the verdict, with the baseline's long shard paths
    rows = wrap(text, 79)
    assert max(len(row) for row in rows) <= 79 and len(rows) > len(text.splitlines())
    words = text.split()
    assert " ".join(rows).split() != words  # something was broken: the `ds-triage inspect` path
    broken = [w for w in " ".join(rows).split() if w not in words]
    assert broken and all(w.endswith("/") or w.startswith("zero_pp_rank") for w in broken)
    assert "".join(broken) in text  # the pieces of the one long path, in order
    styled = wrap("\x1b[1;33m  1. DS-Z001 " + "word " * 30 + "\x1b[0m", 40)  # colour codes take no room
    assert all(width_of(row) <= 40 for row in styled) and width_of(styled[0]) >= 36 and len(styled[0]) > 40
    assert styled[1].startswith("     word")  # an item continues under its text
