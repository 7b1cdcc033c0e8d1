"""A scripted user for the deciding questions (issue 43, item 5): classify a log, ask the question,
let `run` answer it (`answerer`: the asked command run for real where the checkpoint is, through
the chat's own /run policy, never a shell), read the output as evidence, decide again; up to
`answers` times.

The answer at each step is the verdict's category (confirmed or likely) once evidence is in, the
log's first hypothesis before. `converse` is pure but for `run`: no file is read there.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from typing import Callable

from triage import evidence
from triage.evidence import apply
from triage.evidence.question import deciding


@dataclass
class Dialogue:
    answers: list[str] = field(default_factory=list)  # the top category after 0, 1, 2 ... answers
    statuses: list[str] = field(default_factory=list)  # "log", then the verdict's status after each answer
    asked: list[str] = field(default_factory=list)  # the commands asked, in order


def converse(log_text: str, rules, run: Callable[[str], str], answers: int = 2) -> Dialogue:
    """`run(command)`: the output of the asked command, CKPT and TAG filled in by the caller."""
    from triage.classify.classifier import classify
    from triage.probe.target import from_args

    report = classify(log_text, rules=rules)
    out = Dialogue([report.hypotheses[0].rule.category if report.hypotheses else "unknown"], ["log"])
    items: list = []
    seen: set = set()
    categories = [h.rule.category for h in report.hypotheses[:3]]
    target = from_args(None, None, None, log_text)
    for _ in range(answers):
        q = deciding(categories, target, seen, report.facts.get("ckpt") or target.load_dir,
                     report.facts.get("tag") or target.load_tag)
        if q is None:
            break
        seen.add(q.kind)
        out.asked.append(q.command)
        items += [i for i in evidence.read(f"$ {q.command}\n{run(q.command)}") if i.kind != "log"]
        result = apply.triage(report, items, log_text)
        out.answers.append(result.verdict["category"])
        out.statuses.append(result.verdict["status"])
        if result.confirmed:
            break
        categories = [p.hypothesis.rule.category for p in result.probed if p.decision.status != "refuted"][:3]
        seen |= {i.kind for i in items}
    return out


def answerer(root: str, user: tuple[int, int] | None = None, fill: Callable[[str], str] = str) -> Callable[[str], str]:
    """`run` for `converse`: a person at the checkpoint (`root`, as the job's `user` (uid, gid) when
    given) typing the asked command, `fill`ed in, and pasting what the terminal shows. The question
    is one shell line; the chat runs no shell, so its parts go one by one through /run's policy and
    runner (triage.chat.readonly): `a; b` runs a then b, `echo` alone is the newline it prints, and
    a pipe into `head -c N` is /run's output cap of N bytes. Any other part is refused as /run refuses it."""
    from triage.chat import readonly

    ctx = readonly.Context(root=root)

    def one(command: str, cap: int) -> str:
        if command == "echo":
            return "\n"
        found = readonly.plan(command, ctx)
        if isinstance(found, str) or user is None:  # refused, or run as /run runs it
            return readonly.run(command, ctx, cap=cap).output
        setpriv = shutil.which("setpriv", path=readonly.SAFE_PATH)  # the job's user: the kernel decides
        argv = [setpriv, f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups", *found.argv]
        env = {name: os.environ[name] for name in readonly.KEEP_ENV if name in os.environ}
        env.update(PATH=readonly.SAFE_PATH, LC_ALL="C.UTF-8")
        return readonly.execute(argv, command, cap=cap, env=env).output

    def run(command: str) -> str:
        out = []
        for line in _split(_NOTE.sub("", fill(command)), ";"):
            first, *piped = [part.strip() for part in _split(line, "|")]
            caps = [re.fullmatch(r"head -c ?(\d+)", stage) for stage in piped]
            if not all(caps):
                out.append(f"not run: `{line.strip()}`: the scripted user pipes only into head -c\n")
                continue
            out.append(one(first, min([int(c.group(1)) for c in caps] + [readonly.MAX_OUTPUT])))
        return "".join(out)
    return run


_NOTE = re.compile(r"\s{2,}\(.*\)\s*$")  # the question's "   (the loading job's ds_config)": for the person


def _split(command: str, mark: str) -> list[str]:
    """`command` cut at each `mark` outside quotes (sh's single and double quotes, backslashes)."""
    parts, start, quote, i = [], 0, "", 0
    while i < len(command):
        c = command[i]
        if c == "\\" and quote != "'":
            i += 1
        elif quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == mark:
            parts.append(command[start:i])
            start = i + 1
        i += 1
    return [p for p in parts + [command[start:]] if p.strip()]
