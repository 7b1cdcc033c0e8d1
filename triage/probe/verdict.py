"""From probe signals to rule categories: which outcomes confirm or refute each hypothesis.

One table, CATEGORIES: for each rule category, the probe signals (``probe.signal``) that
confirm it, and the checks that must all have come back clear to refute it. A check is a list
of alternatives measuring the same thing (the target stage from --stage or from --config):
one of them checked and clear is enough. A category with no `refute` checks is never refuted
here (the probes cannot rule it out yet). RULES narrows the table for rules whose cause is one
specific file or setting.
"""

from __future__ import annotations

from dataclasses import dataclass

from triage.probe import known_bugs
from triage.probe.result import CONFIRMED, INCONCLUSIVE, REFUTED, ProbeResult

_INTEGRITY = ("empty", "zeroed", "garbage", "lfs_pointer", "truncated", "bad_zip", "crc_mismatch", "bad_pickle",
              "storage_missing")

_CONSISTENCY = ("shard_swapped", "master_differs", "step_differs", "partition_size")

_MODEL = ("prefix_module", "prefix_orig_mod", "prefix_peft", "prefix_model", "missing_keys", "unexpected_keys", "shapes_differ")

CATEGORIES: dict[str, dict[str, list]] = {
    "missing_file": {
        "confirm": ["path.not_found", "path.no_checkpoint", "path.wrong_level", "latest.latest_missing",
                    "latest.latest_dangling", "completeness.tag_missing", "completeness.tag_empty",
                    "completeness.model_missing", "completeness.optim_missing", "completeness.layer_missing"],
        "refute": [["path.not_found"], ["latest.latest_missing"], ["latest.latest_dangling"],
                   ["completeness.tag_missing"], ["completeness.model_missing"], ["completeness.optim_missing"],
                   ["latest.tag_uncertain"]],  # the tag checked is the one the job loaded
    },
    "partial_checkpoint": {
        "confirm": ["completeness.incomplete_save", "path.no_deepspeed_state", "model.adapter_only"],
        "refute": [["completeness.incomplete_save"], ["path.no_deepspeed_state"], ["model.adapter_only"]],
    },
    "permission_denied": {
        "confirm": ["permission.untraversable", "permission.unlistable", "permission.unreadable"],
        "refute": [["permission.untraversable"], ["permission.unlistable"], ["permission.unreadable"]],
    },
    # consistency (--deep): shards exchanged between ranks or mixed from different saves, which DeepSpeed
    # loads without a word (DS-X005 is the log side: the loaders that do compare steps refuse such a mix)
    "corrupt_file": {
        "confirm": [f"integrity.{s}" for s in _INTEGRITY] + ["completeness.extra_shards"]
        + [f"consistency.{s}" for s in _CONSISTENCY],
        "refute": [[f"integrity.{s}"] for s in _INTEGRITY],
    },
    # a plain torch.load refused a global: one outside DeepSpeed's (suspicious), or DeepSpeed's own
    "unsafe_load_blocked": {"confirm": ["integrity.suspicious_pickle", "weights_only.refused_globals"],
                            "refute": [["integrity.suspicious_pickle"], ["weights_only.refused_globals"]]},
    "version_incompatible": {"confirm": ["version.ds_version_missing", "version.known_break"], "refute": []},
    "zero_stage_mismatch": {
        "confirm": ["completeness.stage_differs", "config.stage_differs"],
        "refute": [["completeness.stage_differs", "config.stage_differs"]],
    },
    "parallelism_mismatch": {
        "confirm": ["completeness.world_size_differs", "completeness.mp_differs", "completeness.pipeline_differs",
                    "config.tp_differs", "config.pp_differs"],
        "refute": [["completeness.world_size_differs"], ["config.tp_differs", "completeness.mp_differs"],
                   ["config.pp_differs", "completeness.pipeline_differs"]],
    },
    "config_mismatch": {"confirm": ["config.precision_differs", "config.universal_differs"], "refute": []},
    # model: --model compared with the saved names and shapes; optimizer: --optimizer / --param-groups.
    "model_mismatch": {
        # partition_differs: a flat fp32 partition of another size on the saved dp (the log's claim only)
        "confirm": [f"model.{s}" for s in _MODEL] + ["model.partition_differs"],
        "refute": [[f"model.{s}"] for s in _MODEL],
    },
    "optimizer_mismatch": {
        "confirm": ["optimizer.type_differs", "optimizer.groups_differ"],
        "refute": [["optimizer.type_differs"], ["optimizer.groups_differ"]],
    },
    # The host's memory against what every rank reads. Never refuted: an allocation failure in the
    # log beats an estimate, and the job's own limits (ulimit -v, other tenants) are not visible here.
    "out_of_memory": {"confirm": ["memory.too_small"], "refute": []},
    # By the version probe, per rule (entry): does the load's or the saving release have the bug?
    "known_bug": {"confirm": [], "refute": []},
    "unknown": {"confirm": [], "refute": []},
}

# Facts that confirm a category (or one rule) only when the log names it: alone they are no
# problem (a healthy checkpoint has them), beside an error of that kind they are its reason. A
# checkpoint saved by a newer DeepSpeed than the load's loads fine unless the load fails on a
# version skew; a converter's complaint about a model-parallel, stage-0, unconverted or
# non-Megatron checkpoint is borne out by the checkpoint being one.
SUPPORT: dict[str, list[str]] = {
    "version_incompatible": ["version.saved_newer"],
    # a world size the job's log printed (completeness): a load without optimizer states prints the same
    "parallelism_mismatch": ["completeness.world_size_differs"],
    "DS-P101": ["completeness.model_parallel_saved"],  # zero_to_fp32 on a tp/pp checkpoint
    "DS-Z101": ["completeness.zero0_saved"],  # zero_to_fp32 / ds_to_universal on a stage-0 checkpoint
    "DS-Z004": ["completeness.zero0_saved"],  # a ZeRO engine resuming a stage-0 checkpoint
    "DS-C101": ["completeness.not_universal"],  # load_universal on a checkpoint never converted
    "DS-B101": ["completeness.no_universal_info"],  # ds_to_universal without --inject_missing_state
}

# A confirmed cause the probes explain further: the load did miss a file (missing_file), and the
# checkpoint shows why: the save into that tag died before it finished (partial_checkpoint).
REFINES: dict[str, list[str]] = {
    "missing_file": ["partial_checkpoint"],
}

RULES: dict[str, dict[str, list]] = {
    # a framework's own file the load could not open (trainer_state.json, accelerate's scheduler.bin or
    # its folder, PEFT's adapter_config.json): DeepSpeed's shards say nothing of it
    **{rule: {"confirm": ["path.named_missing"], "refute": [["path.named_missing"]]}
       for rule in ("DS-F301", "DS-F302", "DS-F303", "DS-F305")},
    "DS-F002": {"confirm": ["completeness.optim_missing"], "refute": [["completeness.optim_missing"]]},
    "DS-F003": {"confirm": ["completeness.model_missing"], "refute": [["completeness.model_missing"]]},
    # no `latest` in the dir loaded: missing from the root, or the dir loaded is the root's parent
    "DS-F004": {"confirm": ["latest.latest_missing", "path.wrong_level"],
                "refute": [["latest.latest_missing"], ["path.wrong_level"]]},
    "DS-F102": {"confirm": ["latest.latest_missing"], "refute": [["latest.latest_missing"]]},
    "DS-F005": {"confirm": ["path.wrong_level"], "refute": [["path.wrong_level"]]},
    "DS-X005": {"confirm": ["consistency.step_differs", "consistency.master_differs", "consistency.shard_swapped"],
                "refute": [["consistency.step_differs"], ["consistency.master_differs"], ["consistency.shard_swapped"]]},
    "DS-V001": {"confirm": ["version.known_break"], "refute": [["version.known_break"]]},
    "DS-V002": {"confirm": ["version.ds_version_missing"], "refute": [["version.ds_version_missing"]]},
    "DS-C001": {"confirm": ["config.precision_differs"], "refute": [["config.precision_differs"]]},
    "DS-C002": {"confirm": ["config.precision_differs"], "refute": [["config.precision_differs"]]},
    "DS-C101": {"confirm": ["config.universal_differs"], "refute": [["config.universal_differs"]]},
    # base weights "missing" from an adapter-only checkpoint (PEFT, exclude_frozen_parameters)
    "DS-H001": {"confirm": ["model.adapter_only"], "refute": [["model.adapter_only"]]},
    "DS-M002": {"confirm": ["model.prefix_orig_mod"], "refute": [["model.prefix_orig_mod"]]},
    # also "the whole checkpoint dict loaded into the bare model": a load-code mistake no probe can rule out
    "DS-M003": {"confirm": ["model.prefix_module"], "refute": []},
    # the model probe's reading of a state-dict difference (triage/analysis/state_dict.py) names the cause
    "DS-P002": {"confirm": CATEGORIES["parallelism_mismatch"]["confirm"] + ["model.tp_ratio"],
                "refute": CATEGORIES["parallelism_mismatch"]["refute"]},
    "DS-V005": {"confirm": ["model.buffers_only"], "refute": [["model.buffers_only"]]},
    "DS-M007": {"confirm": ["model.vocab_resized"], "refute": [["model.vocab_resized"]]},
    "DS-H005": {"confirm": ["model.tied_head_missing"], "refute": [["model.tied_head_missing"]]},
    "DS-O001": {"confirm": ["optimizer.type_differs"], "refute": [["optimizer.type_differs"]]},
    "DS-O002": {"confirm": ["optimizer.groups_differ"], "refute": [["optimizer.groups_differ"]]},
}


def entry(category: str, rule_id: str | None = None) -> dict[str, list]:
    if category == "known_bug" and rule_id and rule_id not in RULES:
        # decided by the releases: the version probe checks the rule's affected releases
        # (checks/version.py); affected is a SUPPORT (supports_of), unaffected refutes
        return {"confirm": [], "refute": [[f"version.{known_bugs.signal(rule_id)}"]]}
    return RULES.get(rule_id or "", CATEGORIES.get(category, {"confirm": [], "refute": []}))


def supports_of(category: str, rule_id: str | None) -> list[str]:
    """The facts that confirm this hypothesis only because the log names it (SUPPORT)."""
    own = [f"version.{known_bugs.signal(rule_id)}"] if category == "known_bug" and rule_id else []
    return SUPPORT.get(category, []) + SUPPORT.get(rule_id or "", []) + own


def probes_needed(category: str, rule_id: str | None = None) -> set[str]:
    e = entry(category, rule_id)
    names = {s.split(".", 1)[0] for s in e["confirm"]}
    names |= {s.split(".", 1)[0] for check in e["refute"] for s in check}
    return names


@dataclass
class Decision:
    status: str
    reason: str
    signals: list[str]  # the probe.signal that decided it (found, or checked clear)


# The layout facts a rule's `premise.saved` may name (rules/schema.json), read from the probed tag.
PREMISE_FACTS = {"stage_family": lambda layout: layout.stage_family}


def premise_refuted(premise: dict | None, layout) -> Decision | None:
    """REFUTED when the checkpoint, as the probes read its layout, is not what the rule's cause needs
    (its `premise`); None when it is, or when the layout or the fact is unknown."""
    if not premise or layout is None:
        return None
    for fact, allowed in premise["saved"].items():
        value = PREMISE_FACTS[fact](layout)
        if value is not None and value not in allowed:
            return Decision(REFUTED, f"its premise does not hold: the cause needs {premise['why']}, and this "
                            f"checkpoint was saved {layout.describe()} ({fact} {value})", [f"layout.{fact}"])
    return None


def decide(category: str, rule_id: str | None, results: dict[str, ProbeResult], premise: dict | None = None,
           layout=None) -> Decision:
    """premise, layout: the rule's `premise` and the probed tag's layout; a premise the layout
    contradicts refutes the rule first (what else matched is then another cause's sign)."""
    refuted = premise_refuted(premise, layout)
    if refuted is not None:
        return refuted
    e = entry(category, rule_id)
    found = {f"{r.name}.{s}" for r in results.values() for s in r.signals}
    checked = {f"{r.name}.{s}" for r in results.values() for s in r.checked}
    hits = [s for s in e["confirm"] if s in found]
    supported = {f"{r.name}.{s}" for r in results.values() for s in r.supports}
    hits += [s for s in supports_of(category, rule_id) if s in supported]
    if hits:
        return Decision(CONFIRMED, "found: " + ", ".join(hits), hits)
    if not e["confirm"] and not e["refute"]:
        return Decision(INCONCLUSIVE, "no probe can decide this category yet", [])
    if e["refute"] and all(any(a in checked for a in check) for check in e["refute"]):
        clear = [next(a for a in check if a in checked) for check in e["refute"]]
        return Decision(REFUTED, "checked and clear: " + ", ".join(clear), clear)
    if not e["refute"]:
        return Decision(INCONCLUSIVE, "not found; the probes cannot rule this cause out", [])
    open_checks = [" or ".join(check) for check in e["refute"] if not any(a in checked for a in check)]
    why = [OPEN_CHECK_NOTES[c] for c in open_checks if c in OPEN_CHECK_NOTES]
    return Decision(INCONCLUSIVE, "not found, but not checked: " + ", ".join(open_checks)
                    + "".join(f" ({w})" for w in why), [])


# What an unchecked refutation means, where its name does not say it.
OPEN_CHECK_NOTES = {
    "latest.tag_uncertain": "DeepSpeed printed no tag: the job may have loaded another tag than the one "
                            "checked; give CKPT/TAG to check that one",
}


def findings(results: dict[str, ProbeResult]) -> list[str]:
    """The categories the probes' signals confirm (category table only), in table order."""
    found = {f"{r.name}.{s}" for r in results.values() for s in r.signals}
    return [c for c, e in CATEGORIES.items() if any(s in found for s in e["confirm"])]


def category_of(signal: str) -> str | None:
    """The first category (table order) that `probe.signal` confirms."""
    return next((c for c, e in CATEGORIES.items() if signal in e["confirm"]), None)
