"""The slash commands: each registered with `@command(name, usage, help)`; /help and the
prompt's completion are built from the registry, so a command exists in one place only.

A command is `run(conversation, argument) -> Reply`; it reads and changes the session
through the conversation (triage.chat.conversation) and never writes to the terminal.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from triage.chat import readonly, replies
from triage.chat.reply import PATH, Reply, reply

FACT_NAMES = {"ckpt": "ckpt", "checkpoint": "ckpt", "config": "config", "ds_config": "config",
              "stage": "stage", "world-size": "world_size", "world_size": "world_size"}


@dataclass(frozen=True)
class Command:
    name: str
    usage: str
    help: str
    run: Callable
    completes: str | None = None  # what its argument is: PATH, "fact", or None


REGISTRY: dict[str, Command] = {}


def command(name: str, usage: str, help: str, completes: str | None = None):
    def register(run: Callable) -> Callable:
        REGISTRY[name] = Command(name, usage, help, run, completes)
        return run

    return register


def lookup(message: str) -> tuple[Command, str] | None:
    """(command, argument) when the message's first word is a registered command."""
    if not message.startswith("/") or "\n" in message:
        return None
    name, _, arg = message.partition(" ")
    found = REGISTRY.get(name.lower())
    return (found, arg.strip()) if found else None


def _number(conv, arg: str, usage: str) -> int | Reply:
    """Hypothesis number N from the argument (default 1), or the reply saying what is wrong."""
    ranked = conv.session.ranked()
    if not ranked:
        return reply("No causes yet: paste the failing job's log first.")
    if not arg:
        return 1
    if not arg.isdigit() or not 1 <= int(arg) <= len(ranked):
        return reply(f"{usage}: N is a cause's number, 1 to {len(ranked)}.")
    return int(arg)


@command("/help", "/help", "List the commands.")
def _help(conv, arg: str) -> Reply:
    lines = ["Paste the failing job's log, answer the questions, or use a command:"]
    lines += [f"  {c.usage:28s} {c.help}" for c in REGISTRY.values()]
    lines.append("Enter sends. A paste is sent whole, however many lines; to type several lines, end each "
                 "but the last with Esc-Enter (Alt-Enter). A long reply is paged: space for the next page, "
                 "q to skip the rest. Ctrl-C clears the input, Ctrl-D leaves. Questions and the words help "
                 "and quit need no slash.")
    return reply(*lines)


@command("/probe", "/probe", "Check the checkpoint on disk (read-only) and re-rank the causes.")
def _probe(conv, arg: str) -> Reply:
    if not conv.session.facts.get("ckpt"):
        return conv.ask_fact("ckpt", then=conv.probe_now)
    return conv.probe_now()


@command("/why", "/why [N]", "The evidence for cause N: the log lines, the probe results.")
def _why(conv, arg: str) -> Reply:
    number = _number(conv, arg, "/why N")
    return number if isinstance(number, Reply) else reply(*replies.evidence(conv.session, number))


@command("/fix", "/fix [N]", "How to fix cause N (default the first): steps with their safety, repairs.")
def _fix(conv, arg: str) -> Reply:
    number = _number(conv, arg, "/fix N")
    return number if isinstance(number, Reply) else reply(*replies.fix(conv.session, number, conv.style))


@command("/verify", "/verify [N]", "The commands that check the causes (or cause N), numbered for /run.")
def _verify(conv, arg: str) -> Reply:
    rule_id = None
    if arg:
        number = _number(conv, arg, "/verify N")
        if isinstance(number, Reply):
            return number
        rule_id = conv.session.ranked()[number - 1][0].rule.id
    lines = replies.steps(conv.session, conv.style, rule_id)
    return reply("Verify (read-only; /run N runs one here):", *lines) if lines else reply("No causes yet.")


@command("/run", "/run N | /run COMMAND", "Run check N from /verify (or a command) if it only reads; asks first.")
def _run(conv, arg: str) -> Reply:
    if not arg:
        return reply("/run N runs check N from /verify; /run COMMAND runs a read-only command.")
    command_text = arg
    if arg.isdigit():
        steps = {s.number: s.command for s in conv.session.steps()}
        if int(arg) not in steps:
            return reply(f"No check [{arg}]: /verify lists them.")
        command_text = steps[int(arg)]
    found = readonly.plan(command_text, readonly.Context.of(conv.session))
    if isinstance(found, str):  # one line; a check from /verify is also shown to copy
        return reply(f"Not run: {found}.", *([f"To run it yourself: {command_text}"] if arg.isdigit() else []))
    how = f" ({found.note})" if found.note else ""
    return conv.confirm(f"Run `{command_text}`{how}? It only reads. [y/N]", lambda: conv.run_now(command_text))


@command("/repair", "/repair [ACTION]", "Plan a repair of the checkpoint (a dry run); apply it after a yes.")
def _repair(conv, arg: str) -> Reply:
    from triage.chat.repair import plan
    from triage.repair.registry import names

    ranked = conv.session.ranked()
    actions = ranked[0][0].rule.data.get("repairs", []) if ranked else []
    if not arg:
        hint = f" For cause 1: {', '.join(actions)}." if actions else ""
        return reply(f"/repair ACTION: one of {', '.join(names())}.{hint}")
    if arg not in names():
        return reply(f"No repair {arg!r}: one of {', '.join(names())}.")
    if not conv.session.facts.get("ckpt"):
        return conv.ask_fact("ckpt", then=lambda: plan(conv, arg))
    return plan(conv, arg)


@command("/set", "/set [NAME VALUE]", "Show the facts, or set one: ckpt, config, stage, world-size.",
         completes="fact")
def _set(conv, arg: str) -> Reply:
    if not arg:
        return reply("The load:", *replies.facts(conv.session))
    name, _, value = arg.partition(" ")
    fact = FACT_NAMES.get(name.lower())
    if fact is None or not value.strip():
        return reply("/set NAME VALUE: NAME is ckpt, config, stage or world-size.")
    return conv.give_fact(fact, value)


@command("/rules", "/rules [CATEGORY]", "List the failures ds-triage knows (or one category's).")
def _rules(conv, arg: str) -> Reply:
    from triage.runbook.render import render_list

    rules = [r for r in conv.session.rules.rules if not arg or r.category == arg.strip()]
    if not rules:
        categories = sorted({r.category for r in conv.session.rules.rules})
        return reply(f"No category {arg!r}. Categories: {', '.join(categories)}.")
    return Reply(render_list(rules))


@command("/runbook", "/runbook [QUERY]", "Look a failure up by error text, rule id or category (default cause 1).")
def _runbook(conv, arg: str) -> Reply:
    from triage.chat.lookup import runbook_page

    query = arg or (conv.session.ranked()[0][0].rule.id if conv.session.ranked() else "")
    if not query:
        return reply("/runbook QUERY: words from the error, a rule id (DS-Z001) or a category.")
    return Reply(runbook_page(conv.session.rules, query, conv.style, conv.width))


@command("/export", "/export FILE", "Write a Markdown incident report (asks before replacing a file).",
         completes=PATH)
def _export(conv, arg: str) -> Reply:
    from triage.chat.export import write_report

    if not arg:
        return reply("/export FILE: the Markdown file to write.")
    if conv.session.report is None and conv.session.probe_report is None:
        return reply("Nothing to export yet: paste the log first.")
    path = os.path.abspath(os.path.expanduser(arg.strip("'\"")))
    if os.path.lexists(path):
        return conv.confirm(f"{path} exists. Replace it with the incident report? [y/N]",
                            lambda: write_report(conv.session, path))
    return write_report(conv.session, path)


@command("/reset", "/reset", "Forget this incident (the log, answers, results); keep the command-line options.")
def _reset(conv, arg: str) -> Reply:
    conv.session.reset()
    conv.pending = None
    return reply("Started over. Paste the failing job's log.")


@command("/quit", "/quit", "Leave (Ctrl-D does too).")
def _quit(conv, arg: str) -> Reply:
    return Reply("", done=True)


def fact_words() -> list[str]:
    return ["ckpt", "config", "stage", "world-size"]

