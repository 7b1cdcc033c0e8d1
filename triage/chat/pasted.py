"""Command output pasted into the chat (or printed by /run), read as evidence (triage/evidence/):
what it was read as, the ranking decided on it, what changed; and the deciding question asked when
no checkpoint is at hand. A mixin of Conversation: it uses its session, style, pending and next_step."""

from __future__ import annotations

from triage.chat import replies
from triage.chat.reply import Reply, reply
from triage.errors import TriageError
from triage.logs.inputs import decode_log


class PastedEvidence:
    def read_paste(self, log) -> Reply:
        """A whole paste (piped stdin): command output in it is evidence, the rest the log."""
        from triage import evidence

        items = evidence.read(log.text)
        return self.read_evidence(items) if evidence.has_evidence(items) else self.read_log(log)

    def read_evidence(self, items) -> Reply:
        """Pasted command output (triage/evidence/): the facts it gives, then the ranking decided on
        it, and what changed."""
        from triage import evidence

        session = self.session
        if self.pending is not None and self.pending.fact == "ckpt":
            self.pending = None  # the output from where the checkpoint is answers "where is it?"
        session.evidence += [item for item in items if item.kind != "log"]
        said = reply("Read " + "; ".join(replies.evidence_line(item) for item in items if item.kind != "log") + ".")
        text = evidence.log_text(items)
        if text.strip():  # the log part of the same paste: classified first, its question not asked
            try:
                session.add_log(decode_log(text.encode("utf-8", errors="replace"), "the paste"))
            except TriageError as exc:
                return said + reply(f"error: {exc.message}")
            said = said + reply(*replies.causes(session, self.style))
        if session.report is None:
            return said + reply("Paste the failing job's log to match this with the causes.")
        if not session.report.is_checkpoint_failure or session.probed_checkpoint():
            return said + self.next_step()  # nothing to decide, or the probes read the checkpoint itself
        before = {h.rule.id: (d.status if d else None) for h, d in session.ranked()}
        try:
            session.decide_on_evidence()
        except TriageError as exc:
            return said + reply(f"error: {exc.message}")
        lines = replies.verdict(session, self.style) + replies.changes(session, before)
        return said + reply(*lines) + self.next_step()

    def _deciding(self):
        """The command that tells the open causes apart (asked once), when no checkpoint is at hand."""
        session = self.session
        if session.facts.get("ckpt") or (session.triage is not None and session.triage.confirmed):
            return None
        q = session.question()
        if q is not None:
            session.asked.add(q.kind)
        return q
