"""The log's hypotheses decided on pasted evidence: the same `triage` (probe/report.py) on a
VirtualContext, and which evidence decided each cause (for the JSON report and the chat)."""

from __future__ import annotations

from triage.evidence import Evidence
from triage.evidence.virtual import VirtualCheckpoint, VirtualContext, build

# probe -> the kinds of evidence it reads (what confirmed or refuted a cause through that probe)
READS = {"path": ("listing",), "latest": ("listing", "latest"), "completeness": ("listing", "config", "inspect"),
         "permission": ("listing", "identity", "namei", "mounts"), "integrity": ("listing", "head"),
         "config": ("listing", "config", "inspect"), "memory": ("oom",)}


def context(items: list[Evidence], log_text: str | None, given: dict | None = None) -> VirtualContext:
    """The probe context the evidence describes. given: stage, world_size, config (a path), as the
    command line or the chat's answers give them; they beat the evidence, as --stage beats a log."""
    from triage.probe.target import _config_settings, config_stage, from_args

    given = given or {}
    entries = [e for item in items if item.kind == "listing" for e in item.facts["entries"]]
    latest = next((item.facts["latest"] for item in items if item.kind == "latest"), None)
    ckpt = build(entries, latest) or VirtualCheckpoint(given="(no listing pasted)", given_kind="not_a_checkpoint")
    target = from_args(given.get("stage"), given.get("world_size"), given.get("config"), log_text)
    for item in items:
        if item.kind == "config" and target.config is None and item.facts.get("config") is not None:
            target.config = item.facts["config"]
            source = f"{item.label()}"
            if target.stage is None and config_stage(target.config) is not None:
                target.stage, target.sources["stage"] = config_stage(target.config), source
            _config_settings(target, target.config, source)
        elif item.kind == "versions":
            for name in ("ds_version", "torch_version"):
                if item.facts.get(name) and target.sources.get(name, "").startswith(("the log", "?", "")):
                    setattr(target, name, item.facts[name])
                    target.sources[name] = item.label()
    if ckpt.given_kind == "tag_dir" and ckpt.root in ckpt.files.listed and target.load_dir is None:
        target.load_dir, target.sources["load_dir"] = ckpt.root, "the pasted listing (the dir above the tag)"
    ctx = VirtualContext(ckpt=ckpt, target=target)
    ctx.evidence = [item for item in items if item.kind != "log"]
    return ctx


def triage(report, items: list[Evidence], log_text: str | None, given: dict | None = None):
    """The TriageReport of `report` decided on the evidence (no file opened)."""
    from triage.probe.report import triage as decide

    return decide(report, context(items, log_text, given))


def deciding(result, probed) -> list[str]:
    """The evidence that decided one hypothesis: the pasted outputs its deciding probes read."""
    ctx = result.probe.ctx
    items = getattr(ctx, "evidence", [])
    probes = {s.split(".", 1)[0] for s in probed.decision.signals}
    kinds = {k for p in probes for k in READS.get(p, ())}
    # a config that showed no ds_config (trainer_state.json, one naming its file) decided nothing
    return list(dict.fromkeys(item.label() for item in items if item.kind in kinds
                              and (item.kind != "config" or item.facts.get("config") is not None)))


def to_json(result) -> dict:
    """`triage --json` with the evidence: each pasted output, and per hypothesis which decided it."""
    data = type(result).to_json(result)  # the class's: the instance's may be this function
    by_rule = {p.hypothesis.rule.id: p for p in result.probed}
    for h in data["hypotheses"]:
        p = by_rule.get(h["rule_id"])
        h["evidence_used"] = deciding(result, p) if p is not None else []
    data["evidence"] = [{"kind": e.kind, "what": e.what, "command": e.command or None, "label": e.label()}
                        for e in getattr(result.probe.ctx, "evidence", [])]
    return data
