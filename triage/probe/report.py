"""`probe` and `triage` results and their JSON (docs/schemas/probe.schema.json, triage.schema.json)."""

from __future__ import annotations

from dataclasses import dataclass

from triage.probe import checks, verdict
from triage.probe.context import ProbeContext
from triage.probe.result import CONFIRMED, INCONCLUSIVE, REFUTED, ProbeResult

SCHEMA_VERSION = 1
STATUS_RANK = {CONFIRMED: 0, INCONCLUSIVE: 1, REFUTED: 2}


@dataclass
class ProbeReport:
    ctx: ProbeContext
    results: dict[str, ProbeResult]

    @property
    def findings(self) -> list[str]:
        return verdict.findings(self.results)

    @property
    def problems(self) -> list[ProbeResult]:
        return [r for r in self.results.values() if r.status == CONFIRMED]

    def checkpoint_json(self) -> dict:
        ckpt = self.ctx.ckpt
        layout = self.ctx.layout()
        return {
            "given": ckpt.given, "given_kind": ckpt.given_kind, "root": ckpt.root, "tag": ckpt.tag,
            "tag_source": ckpt.tag_source, "tags": list(ckpt.tags),
            "latest": ckpt.latest.text if ckpt.latest and ckpt.latest.text is not None else None,
            "layout": None if layout is None else {
                "description": layout.describe(), "stage": layout.stage, "stage_family": layout.stage_family,
                "dp": layout.dp, "mp": layout.mp, "tp": layout.tp, "pp": layout.pp, "bf16": layout.bf16,
                "pipeline_layers": len(layout.names.layers), "moe": layout.names.experts,
                "universal": layout.names.universal, "offload": dict(layout.offload),
            },
        }

    def target_json(self) -> dict:
        t = self.ctx.target
        return {"stage": t.stage, "world_size": t.world_size, "config": t.config_path, "model": t.model_path,
                "optimizer": t.optimizer, "param_groups": t.param_groups, "dp": t.dp, "mp": t.mp,
                "pipeline": t.pipeline, "pp": t.pp, "precision": t.precision, "ds_version": t.ds_version,
                "torch_version": t.torch_version,
                "sources": dict(t.sources)}

    def to_json(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "checkpoint": self.checkpoint_json(),
            "target": self.target_json(),
            "probes": [r.to_json() for r in self.results.values()],
            "findings": self.findings,
            "problems": [f"{r.name}: {line}" for r in self.problems for line in (r.headline or [r.summary])],
        }


def probe_all(ctx: ProbeContext, also: tuple[str, ...] = ()) -> ProbeReport:
    """Every probe of checks.ORDER, and `also` (on-request probes the user gave options for)."""
    return ProbeReport(ctx, checks.run(ctx, checks.ORDER + also))


# ---------------------------------------------------------------- triage: the log's hypotheses, probed

@dataclass
class Probed:
    hypothesis: object  # triage.classify.match.Hypothesis
    decision: verdict.Decision
    probe_names: list[str]


@dataclass
class TriageReport:
    report: object  # triage.classify.report.Report (the classification)
    probe: ProbeReport
    probed: list[Probed]  # re-ranked: confirmed, then inconclusive, then refuted

    @property
    def verdict(self) -> dict:
        """One answer: `confirmed` (a probe confirmed it), `likely` (nothing confirmed: the first
        cause the probes did not refute) or `unknown`; category and rule_id are always the answer."""
        found = self.probe.findings
        for p in self.probed:
            if p.decision.status == CONFIRMED and p.hypothesis.rule.category != "unknown":
                deeper = [c for c in verdict.REFINES.get(p.hypothesis.rule.category, []) if c in found]
                if deeper:
                    return self._refined(p, deeper[0])
                return {"status": "confirmed", "category": p.hypothesis.rule.category, "rule_id": p.hypothesis.rule.id,
                        "source": "log", "reason": p.decision.reason}
        if len(found) == 1 and all(p.decision.status == REFUTED for p in self.probed):
            # The log's every guess is ruled out and the checkpoint shows one problem: that is
            # the cause, though no rule recognised how this log reports it.
            signals = [f"{r.name}.{s}" for r in self.probe.results.values() for s in r.signals
                       if verdict.category_of(f"{r.name}.{s}") == found[0]]
            return {"status": "confirmed", "category": found[0], "rule_id": None, "source": "probes",
                    "reason": "every hypothesis from the log was refuted; the probes found: " + ", ".join(signals)}
        for p in self.probed:
            if p.decision.status != REFUTED and p.hypothesis.rule.category != "unknown":
                return {"status": "likely", "category": p.hypothesis.rule.category, "rule_id": p.hypothesis.rule.id,
                        "source": "log", "reason": "no probe confirmed a cause; the first the probes did not "
                        f"refute ({p.decision.reason})"}
        reason = ("every hypothesis from the log was refuted by the probes" if self.probed
                  else "no hypothesis from the log, and the probes found no single cause")
        return {"status": "unknown", "category": "unknown", "rule_id": None, "source": None, "reason": reason}

    def _refined(self, p: Probed, category: str) -> dict:
        """The log's confirmed cause, explained by what the probes found (verdict.REFINES): the
        answer is the deeper cause, with a hypothesis of that category when the log named one."""
        signals = [f"{r.name}.{s}" for r in self.probe.results.values() for s in r.signals
                   if verdict.category_of(f"{r.name}.{s}") == category]
        named = next((q.hypothesis.rule.id for q in self.probed if q.hypothesis.rule.category == category), None)
        return {"status": "confirmed", "category": category, "rule_id": named, "source": "log" if named else "probes",
                "reason": f"{p.hypothesis.rule.id} ({p.hypothesis.rule.category}) confirmed: {p.decision.reason}; "
                          f"the probes show why: " + ", ".join(signals)}

    @property
    def confirmed(self) -> bool:
        return self.verdict["status"] == "confirmed"

    def to_json(self) -> dict:
        base = self.report.to_json()
        by_rule = {h["rule_id"]: h for h in base["hypotheses"]}
        results = self.probe.results
        hypotheses = []
        for p in self.probed:
            h = dict(by_rule[p.hypothesis.rule.id])
            h["status"] = p.decision.status
            h["status_reason"] = p.decision.reason
            h["probe_results"] = [results[n].to_json() for n in p.probe_names if n in results]
            hypotheses.append(h)
        base["hypotheses"] = hypotheses
        base["category"] = hypotheses[0]["category"] if hypotheses else "unknown"
        base["checkpoint"].update(self.probe.checkpoint_json())
        base["target"] = self.probe.target_json()
        base["probes"] = [r.to_json() for r in results.values()]
        base["findings"] = self.probe.findings
        base["verdict"] = self.verdict
        return base


def probes_for(hypotheses) -> list[str]:
    names = {"path"}
    for h in hypotheses:
        names |= set(h.rule.data.get("probes", []))
        names |= verdict.probes_needed(h.rule.category, h.rule.id)
    return _ordered(names)


def _ordered(names) -> list[str]:
    known = [n for n in checks.ORDER if n in names]
    return known + sorted(n for n in names if n not in checks.ORDER)


def triage(report, ctx: ProbeContext) -> TriageReport:
    # Every probe, not only the hypotheses' ones: they cost milliseconds, and what they find
    # beyond the hypotheses is the verdict when the log's every guess is refuted.
    # A log without a trace of DeepSpeed, on which no rule fired, is a job that read the dir some other
    # way (from_pretrained, PEFT): DeepSpeed state missing there is no fault of it.
    ctx.target.without_deepspeed = ctx.target.deepspeed_in_log is False and not report.hypotheses
    ctx.known_bugs = tuple((h.rule.id, h.rule.releases) for h in report.hypotheses
                           if h.rule.category == "known_bug" and h.rule.releases is not None)
    results = checks.run(ctx, _ordered(set(checks.ORDER) | set(probes_for(report.hypotheses))))
    probed = []
    layout = ctx.layout()  # the probed tag as saved: a rule's `premise` is checked against it
    for h in report.hypotheses:
        decision = verdict.decide(h.rule.category, h.rule.id, results, h.rule.data.get("premise"), layout)
        names = set(h.rule.data.get("probes", [])) | verdict.probes_needed(h.rule.category, h.rule.id)
        probed.append(Probed(h, decision, _ordered(names)))
    order = {id(p): i for i, p in enumerate(probed)}
    probed.sort(key=lambda p: (STATUS_RANK[p.decision.status], order[id(p)]))
    return TriageReport(report, ProbeReport(ctx, results), probed)
