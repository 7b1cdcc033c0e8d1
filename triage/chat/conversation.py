"""The dialogue: `Conversation.handle(message) -> Reply`, with no terminal in sight.

A message is one of:

* a slash command (its first word is in the registry, triage.chat.commands);
* the answer to what the conversation asked (a fact, or yes/no), when it asked, unless it is
  shaped like a log line (a traceback's first line, a frame, an exception): that is more log;
* otherwise log text: appended to the incident and the whole log classified again.

After a log it asks, one at a time, for the facts the open hypotheses need
(triage.chat.questions), then offers to probe the checkpoint. Not interactive (stdin piped)
it asks nothing: it probes as soon as a checkpoint is known and lists what was not given.
"""

from __future__ import annotations

import re
from typing import Callable

from triage.chat import commands, intent, questions, replies
from triage.chat.reply import NUMBER, PATH, YES_NO, Ask, Reply, reply
from triage.chat.pasted import PastedEvidence
from triage.chat.session import LABELS, CommandRun, Session
from triage.errors import TriageError
from triage.logs.inputs import decode_log
from triage.classify.render import Style

YES = ("y", "yes", "ok", "sure", "go", "yes please")
NO = ("n", "no", "nope", "not now", "cancel", "skip")
FLAGS = {"ckpt": "--ckpt DIR", "config": "--config FILE", "stage": "--stage N", "world_size": "--world-size N"}
# A line no answer looks like: pasted without bracketed paste, a trace's lines come one by one.
LOG_LINE = re.compile(r'\s*(?:Traceback \(most recent call last\)|During handling of the above exception|'
                      r'The above exception was the direct cause|File "[^"\n]*", line \d+|\[rank\d+\]|'
                      r'[A-Za-z_][\w.]*(?:Error|Exception|Interrupt)(?::|$))')
NEXT = "Next: /fix for the fix, /why N for the evidence, /verify for the checks, /export FILE for a report."


class Conversation(PastedEvidence):
    def __init__(self, session: Session, style: Style | None = None, interactive: bool = True,
                 run_command: Callable[[str], CommandRun] | None = None):
        from triage.chat import readonly

        self.session = session
        self.style = style or Style(False)
        self.interactive = interactive
        self.run_command = run_command or (lambda command: readonly.run(command, readonly.Context.of(self.session)))
        self.pending: Ask | None = None
        self.width: int | None = None  # the terminal's, set by the shell: pages rendered to a width fit it

    # ------------------------------------------------------------------ the entry point

    def handle(self, message: str) -> Reply:
        text = message.replace("\r\n", "\n").replace("\r", "\n").strip("\n")
        line = text.strip()
        found = commands.lookup(line) or commands.lookup(intent.command_word(line) or "")
        if found is not None:
            return self._command(*found)
        if intent.is_question(line):  # asked, not answered: what to do next, never a path or log text
            return self._asked()
        if self.pending is not None and "\n" not in line and not LOG_LINE.match(line):
            return self._answer(line)
        if questions.is_skip(line) and self.session.report is not None:  # "skip" with no question open
            return reply("Skipped.") + self.next_step()
        if not line:
            return Reply()
        first = line.split()[0]
        if "\n" not in line and first.startswith("/") and "/" not in first[1:]:
            return reply(f"Unknown command {first}: /help lists the commands.")
        return self._log(message.replace("\r\n", "\n").replace("\r", "\n"))  # as pasted: line numbers hold

    def _asked(self) -> Reply:
        """A question to the chat (`what should I check first?`): the next step, asked again."""
        session = self.session
        if session.report is None:
            return reply("Paste the failing job's log (or its traceback) first: I rank the causes, then ask for "
                         "the one output that tells them apart.")
        if session.triage is not None and session.triage.confirmed:
            return reply(*replies.verdict(session, self.style)[:2], NEXT)
        session.asked.clear()  # the deciding question, asked again
        return reply("What to check first:") + self.next_step()

    def _command(self, cmd, arg: str) -> Reply:
        waiting = self.pending
        dropped = Reply()
        if waiting is not None and waiting.on_yes is not None:
            self.pending = None  # a command instead of yes or no: not confirmed
            dropped = reply(f"(Not done: {waiting.text.splitlines()[0]})")
        try:
            out = dropped + cmd.run(self, arg)
        except TriageError as exc:
            out = dropped + reply(f"error: {exc.message}")
        if waiting is not None and waiting.fact and self.pending is waiting:
            if waiting.fact in self.session.facts:  # answered by the command (/set)
                self.pending = None
            elif not out.done:
                out = out + reply(f"(Still waiting for the {LABELS[waiting.fact]}: "
                                  f"{waiting.text.splitlines()[0]})")
        return out

    # ------------------------------------------------------------------ answers

    def _answer(self, text: str) -> Reply:
        ask = self.pending
        if ask.on_yes is not None:
            answer = text.lower().rstrip(".!")
            if answer in YES or (not answer and ask.yes_by_default):
                self.pending = None
                return ask.on_yes()
            if answer in NO or not answer:
                self.pending = None
                return reply("Not done.", NEXT if self.session.report else "")
            return reply(f"Please answer yes or no. {ask.text}")
        if not text and ask.default is None:
            return reply(f"Please answer, or say 'skip'. {ask.text}")
        if questions.is_skip(text):
            self.pending = None
            self.session.skipped.add(ask.fact)
            return reply(f"Skipped the {LABELS[ask.fact]}.") + self.next_step()
        try:
            value = questions.parse_answer(ask.fact, text or ask.default)
        except questions.Invalid as exc:
            return reply(f"That does not work: {exc}.", ask.text)  # still waiting for it
        self.pending = None
        return self._set(ask.fact, value, ask.then)

    def give_fact(self, fact: str, text: str) -> Reply:
        """/set: a fact given unasked."""
        try:
            value = questions.parse_answer(fact, text)
        except questions.Invalid as exc:
            return reply(f"That does not work: {exc}.")
        return self._set(fact, value)

    def _set(self, fact: str, value, then: Callable[[], Reply] | None = None) -> Reply:
        session = self.session
        before = {h.rule.id: (d.status if d else None) for h, d in session.ranked()}
        session.set_fact(fact, value)
        said = reply(f"{LABELS[fact][0].upper()}{LABELS[fact][1:]}: {value}.")
        if session.evidence and session.report is not None and not session.facts.get("ckpt"):
            # decided on pasted evidence: decide again with the new fact; the ranking, and what changed
            try:
                session.decide_on_evidence()
                said = said + reply(*replies.verdict(session, self.style), *replies.changes(session, before))
            except TriageError as exc:
                said = said + reply(f"error: {exc.message}")
        elif fact in ("stage", "world_size") and session.report is not None and not session.facts.get("ckpt"):
            said = said + reply(f"Nothing changed in the ranking yet: the {LABELS[fact]} decides against the "
                                "checkpoint's saved layout, which no listing has shown.")
        return said + (then() if then else self.next_step())

    def ask_fact(self, fact: str, then: Callable[[], Reply] | None = None) -> Reply:
        q = questions.next_question(self.session)
        default = q.default if q and q.fact == fact else None
        text = self._question_text(fact)
        self.pending = Ask(text, PATH if fact in ("ckpt", "config") else NUMBER, fact=fact, default=default,
                           then=then)
        return reply(text)

    def _question_text(self, fact: str) -> str:
        q = questions.next_question(self.session)
        return q.text if q and q.fact == fact else questions.TEXT[fact] + "\n(or 'skip')"

    def confirm(self, text: str, on_yes: Callable[[], Reply], yes_by_default: bool = False) -> Reply:
        self.pending = Ask(text, YES_NO, on_yes=on_yes, yes_by_default=yes_by_default)
        return reply(text)

    # ------------------------------------------------------------------ the log and what follows

    def _log(self, text: str) -> Reply:
        from triage import evidence

        items = evidence.read(text)
        if evidence.has_evidence(items):
            return self.read_evidence(items)
        try:
            log = decode_log(text.encode("utf-8", errors="replace"), "the paste")
        except TriageError as exc:
            return reply(f"error: {exc.message}")
        return self.read_log(log)

    def read_log(self, log) -> Reply:
        self.session.add_log(log)
        return reply(*replies.causes(self.session, self.style)) + self.next_step()

    def next_step(self) -> Reply:
        """The next question, else the offer to probe, else what to do next."""
        session = self.session
        if session.report is None:
            return reply("Paste the failing job's log, or /probe to check the checkpoint on its own."
                         if session.facts.get("ckpt") else "")
        if not session.report.is_checkpoint_failure:
            return Reply()
        if session.triage is not None and session.triage.confirmed and not session.facts.get("ckpt"):
            return reply(NEXT)  # decided on pasted evidence: no checkpoint to ask for
        deciding = self._deciding()
        if self.interactive and deciding and questions.next_question(session) \
                and questions.next_question(session).fact == "ckpt":
            # one question, two ways to answer: the path here, or the output of the command there
            return reply(deciding.text(), "Or, if the checkpoint is on this machine:") + self.ask_fact("ckpt")
        if deciding:
            return reply(deciding.text(), "(If the checkpoint is on this machine, /set ckpt PATH probes it here.)")
        if self.interactive:
            q = questions.next_question(session)
            if q is not None:
                return self.ask_fact(q.fact)
        ckpt = session.facts.get("ckpt")
        if ckpt and session.triage is None:
            if not self.interactive:
                return self.probe_now()
            return self.confirm(f"Probe {ckpt} for these causes? It only reads. [Y/n]", self.probe_now,
                                yes_by_default=True)
        if not self.interactive:
            unknown = questions.missing(session)
            if unknown:
                given = ", ".join(f"{LABELS[n]} ({FLAGS[n]}, or a line `/set {n.replace('_', '-')} ...`)"
                                  for n in unknown)
                return reply(f"Not given: {given}.")
        return reply(NEXT)

    def probe_now(self) -> Reply:
        from triage.probe.render import render_probe

        try:
            result = self.session.probe()
        except TriageError as exc:
            return reply(f"error: {exc.message}")
        if self.session.report is None:
            return Reply(render_probe(result, self.style)) + reply("Paste the log to match it with the causes.")
        lines = replies.verdict(self.session, self.style)
        v = result.verdict
        if v["rule_id"]:
            checks = replies.steps(self.session, self.style, v["rule_id"])
            if checks:
                lines += ["Check it yourself:"] + checks
        return reply(*lines, NEXT)

    def run_now(self, command: str) -> Reply:
        from triage import evidence

        run = self.run_command(command)
        self.session.commands.append(run)
        out = reply(*replies.command_run(run))
        # its output is evidence like a paste: it updates the ranking, unless the probes read the checkpoint
        items = [i for i in evidence.read(f"$ {command}\n{run.output}") if i.kind != "log"]
        if items and run.returncode == 0 and self.session.probed_checkpoint():
            return out + reply("Nothing changed in the ranking: the probes read this checkpoint already "
                               "(/why N shows what decided each cause).")
        if items and run.returncode == 0:
            return out + self.read_evidence(items)
        return out + reply("Nothing changed in the ranking: nothing in this output is evidence the causes use.")

    # ------------------------------------------------------------------ for the shells

    def greeting(self) -> str:
        lines = ["ds-triage chat: paste the failing job's log (or its traceback), and I will walk you to the "
                 "cause.", "/help lists the commands; Ctrl-D leaves."]
        given = [f"{LABELS[n]} {self.session.describe(n)}" for n in self.session.given if self.session.facts.get(n)]
        if given:
            lines.append("Known: " + "; ".join(given) + ".")
        return "\n".join(lines) + "\n"

    def prompt(self) -> str:
        ask = self.pending
        if ask is None:
            return "ds-triage> "
        if ask.on_yes is not None:
            return "[Y/n]> " if ask.yes_by_default else "[y/N]> "
        return f"{LABELS[ask.fact]}> "

    def exit_code(self) -> int:
        """As `triage` when probed (0: a cause confirmed), else as `classify` (0: a cause found);
        with no log, 0 when the probes found a problem."""
        from triage.errors import EXIT_FOUND, EXIT_UNKNOWN

        if self.session.triage is not None:
            return EXIT_FOUND if self.session.triage.confirmed else EXIT_UNKNOWN
        if self.session.report is None and self.session.probe_report is not None:  # /probe, no log
            return EXIT_FOUND if self.session.probe_report.problems else EXIT_UNKNOWN
        report = self.session.report
        return EXIT_FOUND if report is not None and report.is_checkpoint_failure else EXIT_UNKNOWN
