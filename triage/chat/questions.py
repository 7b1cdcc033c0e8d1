"""Which facts the open hypotheses need, the next question to ask, and checking an answer.

A hypothesis needs the checkpoint when its rule names probes or its verify commands read
`{ckpt}`/`{tag}`; the ds_config when it names the `config` probe or a command reads
`{config}`; the ZeRO stage or the world size when the probe signal that decides it compares
them (`stage_differs`, `world_size_differs`, triage/probe/verdict.py). A fact already known
(given, or printed in the log: DeepSpeed's config dump) is not asked for; one the user
skipped is not asked again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from triage.chat.reply import NUMBER, PATH
from triage.chat.session import FACTS, Session
from triage.errors import BadInput
from triage.probe import REFUTED

OPEN_HYPOTHESES = 3  # the ones shown as likely causes
SKIP = ("skip", "-", "don't know", "dont know", "unknown", "no idea")

TEXT = {
    "ckpt": "Where is the checkpoint? (the dir the job loads: the --load dir, a global_stepN dir or a shard file)",
    "config": "Which ds_config does the loading job use? (a JSON file)",
    "stage": "Which ZeRO stage does the loading job use? (0-3)",
    "world_size": "What world size are you loading with? (the number of ranks)",
}


class Invalid(ValueError):
    """An answer that cannot be used; the message says why and what to give instead."""


@dataclass(frozen=True)
class Question:
    fact: str
    text: str
    input: str  # PATH or NUMBER
    default: str | None = None


def needed(session: Session) -> list[str]:
    """The facts the open hypotheses need, in FACTS order, known or not."""
    from triage.probe import verdict

    wanted: set[str] = set()
    shown = [(h, d) for h, d in session.ranked() if h.rule.category != "unknown"][:OPEN_HYPOTHESES]
    for h, decision in shown:
        if decision is not None and decision.status == REFUTED:
            continue
        data = h.rule.data
        commands = " ".join(step["command"] for step in data["verify"])
        probes = set(data.get("probes", [])) | verdict.probes_needed(h.rule.category, h.rule.id)
        entry = verdict.entry(h.rule.category, h.rule.id)
        signals = entry["confirm"] + [s for check in entry["refute"] for s in check]
        if probes or "{ckpt}" in commands or "{tag}" in commands:
            wanted.add("ckpt")
        if "config" in probes or "{config}" in commands:
            wanted.add("config")
        if any(s.endswith("stage_differs") for s in signals):
            wanted.add("stage")
        if any(s.endswith("world_size_differs") for s in signals):
            wanted.add("world_size")
    return [name for name in FACTS if name in wanted]


def missing(session: Session) -> list[str]:
    return [name for name in needed(session) if name not in session.skipped and session.describe(name) is None]


def next_question(session: Session) -> Question | None:
    names = missing(session)
    if not names:
        return None
    name = names[0]
    text, default = TEXT[name], None
    if name == "ckpt" and session.report is not None:
        named = session.report.facts.get("ckpt")
        if named and os.path.lexists(named):
            text += f"\nThe log names {named}, which exists here: press Enter to use it."
            default = named
    return Question(name, text + "\n(or 'skip')", PATH if name in ("ckpt", "config") else NUMBER, default)


def parse_answer(name: str, answer: str):
    """The answer as the fact's value, or Invalid with a message that says what to give."""
    text = answer.strip()
    if name in ("ckpt", "config"):
        path = os.path.abspath(os.path.expanduser(text.strip("'\"")))
        if not os.path.lexists(path):
            raise Invalid(f"no such file or directory: {path}")
        if name == "config":
            if os.path.isdir(path):
                raise Invalid(f"{path} is a directory; give the ds_config JSON file")
            from triage.probe.target import read_config

            try:
                read_config(path)
            except BadInput as exc:
                raise Invalid(exc.message.removeprefix("--config: ")) from None
        return path
    try:
        value = int(text)
    except ValueError:
        raise Invalid(f"not a whole number: {text!r}") from None
    if name == "world_size" and value < 1:
        raise Invalid(f"the world size is the number of ranks, at least 1: got {value}")
    if name == "stage" and not 0 <= value <= 3:
        raise Invalid(f"the ZeRO stage is 0, 1, 2 or 3: got {value}")
    return value


def is_skip(answer: str) -> bool:
    return answer.strip().lower() in SKIP
