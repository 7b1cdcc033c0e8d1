"""ProbeResult: what one probe found, and its stable JSON form (docs/schemas/probe.schema.json)."""

from __future__ import annotations

from dataclasses import dataclass, field

CONFIRMED, REFUTED, INCONCLUSIVE = "confirmed", "refuted", "inconclusive"
STATUSES = (CONFIRMED, REFUTED, INCONCLUSIVE)


@dataclass
class ProbeResult:
    name: str
    status: str
    summary: str
    evidence: list[str] = field(default_factory=list)
    command: str = ""
    signals: list[str] = field(default_factory=list)  # problems found: confirmed iff any
    checked: list[str] = field(default_factory=list)  # signals it could test, found or clear
    facts: dict = field(default_factory=dict)
    found_lines: int = 0  # how many evidence lines (from the first) say what was found; the rest is context
    load: dict | None = None  # reproduce: the load it ran (ds_config, world size, stage, model), in the JSON
    sources: dict = field(default_factory=dict)  # the load's setting -> where it came from ("--config", "the log, line 12")
    supports: list[str] = field(default_factory=list)  # facts that confirm a cause only the log names (verdict.SUPPORT)
    known_bugs: list[dict] = field(default_factory=list)  # version: each known_bug hypothesis against the releases

    @property
    def headline(self) -> list[str]:
        """The evidence lines that say what was found (at least one line when there is any)."""
        return self.evidence[:max(1, self.found_lines)]

    def to_json(self) -> dict:
        data = {
            "name": self.name, "status": self.status, "summary": self.summary,
            "evidence": list(self.evidence), "command": self.command,
            "signals": list(self.signals), "checked": list(self.checked),
            "sources": dict(self.sources), "supports": list(self.supports),
        }
        if self.load is not None:
            data["load"] = self.load
        if self.known_bugs:
            data["known_bugs"] = [dict(bug) for bug in self.known_bugs]
        return data


@dataclass
class Findings:
    """What a probe's checks found, in the shape outcome() takes."""

    signals: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    context: list[str] = field(default_factory=list)
    complete: bool = True

    def unknown(self, note: str) -> None:
        """Something it could not check: the probe cannot refute its problem."""
        self.complete = False
        self.context.append(note)

    def compared(self, signal: str, differs: bool, text: str) -> None:
        self.checked.append(signal)
        if differs:
            self.found(signal, text)
        else:
            self.context.append(text)

    def found(self, signal: str, text: str) -> None:
        self.signals.append(signal)
        self.evidence.append(text)


def outcome(name: str, *, signals: list[str], checked: list[str], complete: bool, found: str,
            clear: str, unknown: str, evidence: list[str], command: str, facts: dict | None = None,
            context: list[str] | None = None, sources: dict | None = None,
            supports: list[str] | None = None) -> ProbeResult:
    """The usual status rule: any signal -> confirmed; all checked and clear -> refuted; else inconclusive.

    evidence: what was found (first in the result); context: what the probe saw around it."""
    signals = list(dict.fromkeys(signals))
    checked = list(dict.fromkeys(checked + signals))
    if signals:
        status, summary = CONFIRMED, found
    elif complete and checked:
        status, summary = REFUTED, clear
    else:
        status, summary = INCONCLUSIVE, unknown
    return ProbeResult(name, status, summary, list(evidence) + list(context or []), command, signals, checked,
                       facts or {}, found_lines=len(evidence), sources=dict(sources or {}),
                       supports=list(supports or []))


def not_implemented(name: str) -> ProbeResult:
    return ProbeResult(name, INCONCLUSIVE, f"the {name} probe is not implemented yet", [], "", [], [])
