"""Is this known bug in the releases at hand? For the version probe (checks/version.py).

A known_bug rule names the releases with the defect (triage.kb.releases). Here they meet the
releases of this case: the one that ran the load (the log's `DeepSpeed info: version=`, else the
installed one) and the ones that saved the checkpoint (the shards' ds_version). The rule's
`decided_by` says which of them decides: a load-time bug is ruled out by a load release without it
whatever saved the checkpoint; a bug in what was written, by a saving release without it.
Packages other than deepspeed are judged by the installed release only (a checkpoint does not
record them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

SIGNAL = "release_affected:"  # + rule id: supported when affected, checked when decided


def signal(rule_id: str) -> str:
    return SIGNAL + rule_id


@dataclass
class Releases:
    """The releases of this case: the load's (with where it came from), installed, saved."""

    load: dict[str, str | None]  # package -> the release that ran the load
    installed: dict[str, str | None]
    saved: list[str] = field(default_factory=list)  # DeepSpeed releases named by the shards' ds_version
    sources: dict[str, str] = field(default_factory=dict)  # package -> where its load release came from

    def source(self, package: str) -> str:
        return self.sources.get(package, "installed here")


@dataclass
class Assessment:
    rule_id: str
    decided_by: str
    affected: bool | None  # the deciding release(s) have the defect; None: a deciding release is unknown
    packages: list[dict]
    line: str

    def to_json(self) -> dict:
        return {"rule_id": self.rule_id, "decided_by": self.decided_by, "affected": self.affected,
                "packages": self.packages, "summary": self.line}


def _has(rng, versions: list[str | None]) -> bool | None:
    """Any of these releases has the defect: True; all known and none has: False; else None."""
    answers = [rng.has_defect(v) for v in versions]
    if any(a is True for a in answers):
        return True
    return False if answers and all(a is False for a in answers) else None


def _word(answer: bool | None) -> str:
    return {True: "affected", False: "not affected", None: "unknown"}[answer]


def assess(rule_id: str, bug, releases: Releases) -> Assessment:
    """`bug`: triage.kb.releases.BugReleases of the rule."""
    packages, verdicts, parts = [], [], []
    for rng in bug.packages:
        load = releases.load.get(rng.package)
        entry = {"package": rng.package, "affected_releases": rng.written or str(rng.affected),
                 "fixed": str(rng.fixed) if rng.fixed else None,
                 "load": load, "load_affected": rng.has_defect(load)}
        installed = releases.installed.get(rng.package)
        if installed != load:
            entry.update(installed=installed, installed_affected=rng.has_defect(installed))
        text = [f"the load's {load or 'unknown release'} ({releases.source(rng.package)}) "
                f"{_word(entry['load_affected'])}"]
        if "installed" in entry:
            text.append(f"installed {installed or 'none'} {_word(entry['installed_affected'])}")
        deciding = [load]
        if rng.package == "deepspeed":
            saved_affected = _has(rng, releases.saved) if releases.saved else None
            entry.update(saved=list(releases.saved), saved_affected=saved_affected)
            text.append(f"saved by {', '.join(releases.saved) or 'an unknown release'} {_word(saved_affected)}")
            deciding = {"load": [load], "save": list(releases.saved) or [None],
                        "either": [load] + (list(releases.saved) or [None])}[bug.decided_by]
        answer = _has(rng, deciding)
        verdicts.append(answer)
        packages.append(entry)
        parts.append(f"{rng.describe()}: " + ", ".join(text))
    if any(v is False for v in verdicts):
        affected = False
    elif verdicts and all(v is True for v in verdicts):
        affected = True
    else:
        affected = None
    whose = {"load": "the load's release", "save": "the release that saved the checkpoint",
             "either": "the load's or the saving release (either script may have run)"}[bug.decided_by]
    outcome = {True: f"{whose} has this bug", False: f"{whose} does not have this bug: ruled out",
               None: f"cannot tell: {whose} is not known"}[affected]
    return Assessment(rule_id, bug.decided_by, affected, packages, f"{rule_id}: {'; '.join(parts)} -> {outcome}")
