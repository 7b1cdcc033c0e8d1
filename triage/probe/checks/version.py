"""version: the DeepSpeed release that saved the checkpoint vs the one installed here.

Saved: `ds_version` of the model-states files and of every optimizer shard (safe_pickle).
The load's release: the one the failing job's log names (`DeepSpeed info: version=`), else the
deepspeed installed here (importlib.metadata; nothing is imported). KNOWN_BREAKS says what is
known to fail between them.

Confirmed: ds_version_missing (an optimizer shard of ZeRO-1/2 or the bf16 optimizer has no
ds_version: DeepSpeed asserts "Empty ds_version in checkpoint") or known_break.

Saved by a newer release than the load's is a fact (`supports: saved_newer`, naming both
releases), not a finding: DeepSpeed checks ds_version only in ZeRO-1 optimizer shards (>= 0.3.17),
and the corpus holds checkpoints rewritten to say 0.99.0 that 0.19.8 loads without a word
(zero2-dp1-optim-ds-version-newer, zero2-dp1-model-states-ds-version-newer). So it never makes
`probe` or `verify` fail; it confirms a cause only when the log's own error is a version skew
(a version_incompatible hypothesis: verdict.SUPPORT), where it is the likely reason.

Known bugs (triage only: ctx.known_bugs holds the known_bug hypotheses' rules): for each, whether
the load's release and the saving release are among the rule's affected releases
(triage/probe/known_bugs.py). The deciding release having the bug supports the hypothesis
(`release_affected:<rule id>`); not having it refutes it (checked, not supported).
"""

from __future__ import annotations

import importlib.metadata as md
import re

from triage.probe.context import ProbeContext
from triage.probe.pickle_bounds import SHOWN_CHARS, shown
from triage.probe.result import ProbeResult, outcome

NAME = "version"
SIGNALS = ("ds_version_missing", "known_break")

# (what, applies(stage, saved_version_tuple, installed_tuple), why)
KNOWN_BREAKS = (
    ("ZeRO-1 optimizer shard saved before 0.3.17",
     lambda stage, saved, installed: stage == 1 and saved is not None and saved < (0, 3, 17),
     "ZeRO stage 1 changed in 0.3.17 and cannot load older stage-1 shards (DeepSpeed <= 0.5.8 with "
     "legacy_stage1 can)"),
)


UNKNOWN_LOAD = ("the loading job's DeepSpeed release is unknown (none installed here, none in the log): give "
                "--deepspeed-version (and --torch-version), the releases the job runs")


def parse(version) -> tuple[int, ...] | None:
    if not isinstance(version, str):
        return None
    m = re.match(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?", version)
    return tuple(int(g or 0) for g in m.groups()) if m else None


def label(version) -> str:
    """A saved ds_version as the report names it: a stranger's value, so never more than a line of it
    (str() of a crafted list could be gigabytes)."""
    if not version:
        return "none"
    return version if isinstance(version, str) and len(version) <= SHOWN_CHARS else shown(version)


def installed(package: str) -> str | None:
    try:
        return md.version(package)
    except md.PackageNotFoundError:
        return None


def probe(ctx: ProbeContext) -> ProbeResult:
    listing = ctx.listing
    ds_installed, torch_installed = installed("deepspeed"), installed("torch")
    evidence: list[str] = []
    context = [f"installed: deepspeed {ds_installed or 'not installed'}, torch {torch_installed or 'not installed'}"]
    sources = {}
    if ctx.target.ds_version:  # the release the failing job ran beats the one installed here
        ds_installed, sources = ctx.target.ds_version, {"ds_version": ctx.target.sources.get("ds_version", "?")}
        context.append(f"the load ran deepspeed {ds_installed} ({sources['ds_version']})")
    if ctx.target.torch_version:
        sources["torch_version"] = ctx.target.sources.get("torch_version", "?")
        context.append(f"the load runs torch {ctx.target.torch_version} ({sources['torch_version']})")
    if listing is None or not listing.exists or listing.error:
        bugs = _known_bugs(ctx, sources, [])
        return _with_bugs(outcome(NAME, signals=[], checked=[], complete=False, found="", clear="",
                                  unknown="no shard could be read for its ds_version", evidence=evidence,
                                  context=context, command=""), bugs)
    signals: list[str] = []
    saved: dict[str, list[str]] = {}
    unread = 0
    for shard in listing.of("model", "zero3_model", "optim"):
        meta = ctx.meta(shard.name)
        if meta.error:
            unread += 1  # integrity reports why; the others decide
            continue
        version = meta.ds_version
        if shard.kind == "optim":
            stage = meta.zero_stage
            # ZeRO-1/2 and the bf16 optimizer (stages 0-2) assert a ds_version in their state; ZeRO-3,
            # bf16 or not, keeps none there and checks none
            checks_it = stage in (1, 2) or (shard.bf16 and stage != 3)
            checked_version = meta.optim_ds_version if checks_it else version
            if (not isinstance(checked_version, str) or not checked_version) and checks_it:
                signals.append("ds_version_missing")
                evidence.append(f"{shard.name}: no ds_version in the optimizer state (ZeRO-{stage}); DeepSpeed "
                                "asserts 'Empty ds_version in checkpoint, not clear how to proceed'")
            for what, applies, why in KNOWN_BREAKS:
                if applies(stage, parse(checked_version), parse(ds_installed)):
                    signals.append("known_break")
                    evidence.append(f"{shard.name}: {what} ({label(checked_version)}): {why}")
            if isinstance(checked_version, str) and checked_version and checked_version != version:
                version = checked_version
        saved.setdefault(label(version), []).append(shard.name)
    if not saved and not signals:
        return outcome(NAME, signals=[], checked=[], complete=False, found="", clear="",
                       unknown="no readable shard to take ds_version from", evidence=evidence, context=context,
                       command="")
    for version, names in saved.items():
        context.append(f"saved by deepspeed {version}: {len(names)} file(s)"
                        + (f" ({', '.join(names[:3])})" if len(saved) > 1 else ""))
    if len(saved) > 1:
        context.append("the shards name different DeepSpeed releases: files from different saves?")
    newest = max((v for v in saved if parse(v)), key=parse, default=None)
    mine = parse(ds_installed)
    supports, clear = [], "no known incompatibility between the saved and installed DeepSpeed"
    if newest and mine and parse(newest) > mine:
        supports.append("saved_newer")
        loader = (f"the load's {ds_installed} ({sources['ds_version']})" if "ds_version" in sources
                  else f"the installed {ds_installed}")
        context.insert(0, f"saved by deepspeed {newest}, newer than {loader}: no break between them is known to "
                          "ds-triage (DeepSpeed checks ds_version only in ZeRO-1 optimizer shards); the likely cause "
                          "only if the load's error is a version skew")
        clear = f"no known incompatibility; saved by a newer DeepSpeed ({newest}) than {loader}"
    if unread:
        context.append(f"{unread} shard(s) unreadable (see integrity), not counted")
    sample = ctx.q(ctx.ckpt.tag, (listing.of("optim") or listing.of("model", "zero3_model"))[0].name) \
        if (listing.of("optim") or listing.of("model", "zero3_model")) else ""
    command = (f"ds-triage inspect {sample} | grep ds_version; " if sample else "") + \
        "pip show deepspeed torch | grep -E '^(Name|Version)'"
    bugs = _known_bugs(ctx, sources, [v for v in saved if v != "none"])
    return _with_bugs(outcome(NAME, signals=signals, checked=list(SIGNALS) if mine else ["ds_version_missing"],
                              complete=mine is not None,  # without the load's release: known breaks unchecked
                              found="the installed DeepSpeed cannot load this checkpoint's version",
                              clear=clear, unknown=UNKNOWN_LOAD, evidence=evidence, context=context,
                              command=command if mine else f"ds-triage probe {ctx.q()} --deepspeed-version X.Y.Z",
                              sources=sources, supports=supports, facts={"saved": sorted(saved), "load": ds_installed}),
                      bugs)


def _known_bugs(ctx: ProbeContext, sources: dict, saved: list[str]) -> list:
    """The known_bug hypotheses of this triage (ctx.known_bugs) against this case's releases."""
    if not ctx.known_bugs:
        return []
    from triage.probe.known_bugs import Releases, assess

    packages = {name for _, bug in ctx.known_bugs for name in (p.package for p in bug.packages)}
    here = {name: installed(name) for name in packages | {"deepspeed"}}
    load = dict(here)
    if ctx.target.ds_version:
        load["deepspeed"] = ctx.target.ds_version
    if ctx.target.torch_version:
        load["torch"] = ctx.target.torch_version
    releases = Releases(load=load, installed=here, saved=sorted(saved, key=lambda v: parse(v) or ()),
                        sources={package: sources[key] for package, key in (("deepspeed", "ds_version"),
                                                                            ("torch", "torch_version")) if key in sources})
    return [assess(rule_id, bug, releases) for rule_id, bug in ctx.known_bugs]


def _with_bugs(result: ProbeResult, bugs: list) -> ProbeResult:
    """Each known bug decided is `checked`; one the deciding release has is a `supports` (it confirms
    that known_bug hypothesis only: verdict.SUPPORT); the lines go first in the context."""
    from triage.probe.known_bugs import signal

    for bug in bugs:
        if bug.affected is not None:
            result.checked.append(signal(bug.rule_id))
        if bug.affected:
            result.supports.append(signal(bug.rule_id))
    result.evidence[result.found_lines:result.found_lines] = [bug.line for bug in bugs]
    result.known_bugs = [bug.to_json() for bug in bugs]
    return result
