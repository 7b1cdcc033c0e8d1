"""The incident a chat is about: the log pasted so far, its classification, the facts of the
load the user means to make (checkpoint, ds_config, world size, ZeRO stage), the probe
verdict, and the commands run. Classification and probing are the same calls `classify` and
`triage` make; this module only keeps their results together.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from triage.logs.inputs import LogText
from triage.kb import RuleSet

FACTS = ("ckpt", "config", "stage", "world_size")
RELEASES = ("deepspeed_version", "torch_version")  # the loading job's, from the command line only
LABELS = {"ckpt": "checkpoint", "config": "ds_config", "stage": "ZeRO stage", "world_size": "world size"}


@dataclass
class CommandRun:
    command: str
    returncode: int | None  # None: stopped at the time limit
    output: str
    truncated: bool = False  # the output was longer than the cap


@dataclass
class Step:
    """One verification command, filled in with the facts; `number` is what /run takes."""

    number: int
    rule_id: str
    command: str
    shows: str


@dataclass
class Session:
    rules: RuleSet
    given: dict = field(default_factory=dict)  # facts from the command line: kept by /reset
    log: str = ""
    truncated: bool = False
    decode_errors: int = 0
    report: object = None  # triage.classify.report.Report of the log so far
    facts: dict = field(default_factory=dict)  # name -> value
    sources: dict = field(default_factory=dict)  # name -> "--ckpt", "you", ...
    skipped: set = field(default_factory=set)  # facts the user chose not to give
    triage: object = None  # triage.probe.report.TriageReport of the last probe run, or None
    probe_report: object = None  # triage.probe.report.ProbeReport when probed without a log
    commands: list[CommandRun] = field(default_factory=list)
    evidence: list = field(default_factory=list)  # triage.evidence.Evidence pasted (not log text)
    asked: set = field(default_factory=set)  # the deciding questions' evidence kinds already asked for

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.log, self.truncated, self.decode_errors, self.report = "", False, 0, None
        self.facts = {k: v for k, v in self.given.items() if v is not None}
        self.sources = {k: f"--{k.replace('_', '-')}" for k in self.facts}
        self.skipped, self.triage, self.probe_report, self.commands = set(), None, None, []
        self.evidence, self.asked = [], set()

    # ------------------------------------------------------------------ the log

    def add_log(self, log: LogText) -> None:
        """Append a paste to the incident's log and classify the whole of it again."""
        from triage.classify.classifier import classify

        self.log = f"{self.log}\n{log.text}" if self.log else log.text
        self.truncated |= log.truncated
        self.decode_errors += log.decode_errors
        self.report = classify(self.log, rules=self.rules, truncated=self.truncated,
                               decode_errors=self.decode_errors, facts=self._classify_facts())
        self.triage = None

    def _classify_facts(self) -> dict:
        facts = {"config": self.facts.get("config")}
        ckpt = self.facts.get("ckpt")
        if ckpt:
            from triage.probe.checkpoint import locate

            where = locate(ckpt)
            facts.update(ckpt=where.root or ckpt, tag=where.tag)
        return facts

    # ------------------------------------------------------------------ facts

    def set_fact(self, name: str, value, source: str = "you") -> None:
        self.facts[name], self.sources[name] = value, source
        self.skipped.discard(name)
        self.triage = self.probe_report = None  # probed with other facts: stale
        if self.report is not None:
            self.report.facts.update({k: v for k, v in self._classify_facts().items() if v})

    def target(self):
        """What the load is set up with: the facts given, then what the log printed."""
        from triage.probe.target import from_args

        return from_args(self.facts.get("stage"), self.facts.get("world_size"), self.facts.get("config"),
                         self.log or None)

    def target_args(self) -> argparse.Namespace:
        """The facts as `ds-triage triage` options, so the probe context is built by the same code."""
        from triage.cli.probe import add_target_options

        parser = argparse.ArgumentParser(add_help=False)
        add_target_options(parser)
        args = parser.parse_args([])
        for name in FACTS + RELEASES:
            setattr(args, name, self.facts.get(name))
        return args

    # ------------------------------------------------------------------ probing

    def probe(self):
        """Probe the checkpoint: with a log, the `triage` verdict; without, the `probe` report."""
        from triage.cli.probe import context_from
        from triage.probe.report import probe_all, triage

        if not self.facts.get("ckpt") and self.evidence and self.report is not None:
            return self.decide_on_evidence()
        ctx = context_from(self.target_args(), self.log or None)
        if self.report is None:
            self.probe_report = probe_all(ctx)
            return self.probe_report
        self.report.facts.update(ckpt=ctx.ckpt.root, tag=ctx.ckpt.tag, config=self.facts.get("config"))
        self.triage = triage(self.report, ctx)
        return self.triage

    def decide_on_evidence(self):
        """The `triage` verdict on the pasted evidence (triage/evidence/): no file here is read."""
        from triage.evidence import apply

        given = {"stage": self.facts.get("stage"), "world_size": self.facts.get("world_size"),
                 "config": self.facts.get("config")}
        self.triage = apply.triage(self.report, self.evidence, self.log or None, given)
        return self.triage

    def probed_checkpoint(self) -> bool:
        """The verdict is the probes' on the checkpoint itself, not one decided on pasted evidence."""
        return self.triage is not None and not hasattr(self.triage.probe.ctx, "evidence")

    def question(self):
        """The deciding question for the open causes (triage/evidence/question.py), or None."""
        from triage.evidence.question import deciding

        if self.report is None:
            return None
        open_ = [h.rule.category for h, d in self.ranked() if d is None or d.status != "refuted"][:3]
        target = self.target()
        ckpt = self.facts.get("ckpt") or self.report.facts.get("ckpt") or target.load_dir
        return deciding(open_, target, {e.kind for e in self.evidence} | self.asked, ckpt, target.load_tag)

    # ------------------------------------------------------------------ what to show

    def ranked(self) -> list[tuple[object, object]]:
        """(hypothesis, decision or None), in the current order: the verdict's once probed."""
        if self.triage is not None:
            return [(p.hypothesis, p.decision) for p in self.triage.probed]
        return [(h, None) for h in (self.report.hypotheses if self.report else [])]

    def steps(self) -> list[Step]:
        """Every hypothesis' verification commands, in verification order, each once."""
        if self.report is None:
            return []
        out: list[Step] = []
        seen: set[str] = set()  # two causes often share a check (`ls -la` of the tag dir)
        for h in self.report.in_verification_order():
            for step in self.report.verify_steps(h):
                if step["command"] not in seen:
                    seen.add(step["command"])
                    out.append(Step(len(out) + 1, h.rule.id, step["command"], step["shows"]))
        return out

    def describe(self, name: str) -> str | None:
        value = self.facts.get(name)
        if value is not None:
            return f"{value} ({self.sources.get(name, 'you')})"
        if name in ("stage", "world_size", "config") and self.log:
            target = self.target()
            found = getattr(target, name, None)
            if found is not None:
                if name == "config":
                    found = target.config_path or "printed by DeepSpeed"
                return f"{found} ({target.sources.get(name, 'the log')})"
        return None
