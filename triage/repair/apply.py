"""Plan a repair, and with --apply do it and verify the result (structure, then a real load)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

from triage import progress
from triage.probe import deps
from triage.errors import BadInput, TimedOut, TriageError
from triage.probe import trust
from triage.repair import files, registry
from triage.repair.plan import Check, Options, Plan, Source

SCHEMA_VERSION = 1


@dataclass
class Outcome:
    plan: Plan
    applied: bool = False
    done: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    load: object = None  # triage.repair.real_load.LoadResult
    load_skipped: str | None = None  # why no real DeepSpeed load ran
    rolled_back: str | None = None
    trust: object = None  # triage.probe.trust.TrustReport of the tag read, before anything loaded it

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks) and (self.load is None or self.load.ok)

    @property
    def status(self) -> str:
        if not self.applied:
            return "planned"
        return "repaired" if self.ok else "verification_failed"

    def to_json(self) -> dict:
        load = self.load.to_json() if self.load is not None else {"ran": False, "reason": self.load_skipped}
        return {"schema_version": SCHEMA_VERSION, "status": self.status, "summary": registry.summary(self.plan.action),
                "plan": self.plan.to_json(), "applied": self.applied, "done": self.done,
                "verification": {"structural": [c.to_json() for c in self.checks], "load": load},
                "rolled_back": self.rolled_back, "trust": self.trust.to_json() if self.trust else None,
                "trusted_note": self.trust.trusted_note() if self.trust else None}


def make_plan(action: str, path: str, options: Options) -> Plan:
    if not os.path.lexists(path):
        raise BadInput(f"{path}: no such file or directory")
    source = Source.locate(path, options.tag)
    plan = registry.action(action).plan(source, options)
    plan.timeout = options.timeout
    if plan.tag:
        scanned = trust.scan_load(plan.root, plan.tag, _pointers(plan))
        if scanned.untrusted:
            plan.notes.append(f"--apply refuses this tag unless --trust-checkpoint: {len(scanned.untrusted)} file(s) "
                              f"not verified safe ({scanned.describe()})")
    gone = deps.missing(needs(plan, options))
    if gone:
        plan.notes.append(f"--apply cannot be used here: it needs {' and '.join(gone)}, not installed ({deps.INSTALL})")
    return plan


def _pointers(plan: Plan) -> tuple[str, ...]:
    """The tag pointers a later load of the root reads: all but one this action rewrites (repair latest)."""
    rewritten = set(plan.replaces) | set(plan.writes)
    return tuple(p for p in trust.POINTERS if os.path.join(plan.root, p) not in rewritten)


def needs(plan: Plan, options: Options) -> tuple[str, ...]:
    """What --apply imports: its commands' packages (the action's NEEDS), and the verifying load's."""
    own = tuple(getattr(registry.action(plan.action), "NEEDS", ())) if plan.commands else ()
    return tuple(dict.fromkeys(own + (deps.LOAD if skip_reason(plan, options) is None else ())))


def skip_reason(plan: Plan, options: Options) -> str | None:
    if plan.load is None:
        return "this action has no load to check"
    if not options.model_factory:
        return ("not run: pass --model-factory MODULE:FUNCTION (a function building your model) to load the "
                "result with real DeepSpeed")
    return None


def apply(plan: Plan, options: Options) -> Outcome:
    module = registry.action(plan.action)
    deps.require(needs(plan, options), f"repair {plan.action} --apply")  # before anything is written or loaded
    outcome = Outcome(plan, applied=True)
    if plan.tag:  # every action converts, rewrites or (to verify) loads the tag: the trust gate first
        outcome.trust = trust.gate(plan.root, plan.tag, options.trust_checkpoint, f"repair {plan.action} --apply",
                                   _pointers(plan))
    if plan.staging:
        outcome.done += files.fresh_staging(plan.staging)
        try:
            outcome.done += module.execute(plan, plan.staging)
            files.publish(plan.staging, plan.out)
        except TriageError as exc:
            shutil.rmtree(plan.staging, ignore_errors=True)
            note = outcome.trust.trusted_note() if outcome.trust else None
            if note:  # the error, not a report, is all the user sees: it must still say what was trusted
                exc.message = f"{note}. {exc.message}"
            raise
        except BaseException:
            shutil.rmtree(plan.staging, ignore_errors=True)
            raise
        outcome.done.append(f"wrote {plan.out}")
    else:
        outcome.done += module.execute(plan, None)
    outcome.checks = module.structural(plan)
    outcome.load_skipped = skip_reason(plan, options)
    if outcome.load_skipped is None and all(c.ok for c in outcome.checks):
        outcome.load = _verifying_load(plan, options, module)
    elif outcome.load_skipped is None:
        outcome.load_skipped = "not run: the structural checks failed"
    if not outcome.ok and hasattr(module, "rollback"):
        outcome.rolled_back = module.rollback(plan) or None
    return outcome


def _verifying_load(plan: Plan, options: Options, module):
    """The real DeepSpeed load of the result; past --timeout, what was written is said (and `latest`
    put back) before the error goes up."""
    from triage.repair import real_load

    progress.write(f"repair {plan.action}: verifying the result with a real DeepSpeed load on "
                   f"{plan.load.world_size} rank(s)")
    try:
        return real_load.run(plan.load, options.model_factory, options.timeout,
                             label=f"repair {plan.action}: DeepSpeed load")
    except TimedOut as exc:
        undone = module.rollback(plan) if hasattr(module, "rollback") else ""
        exc.message += (f". The result was written and structurally checked, not loaded: {plan.out}"
                        + (f"; {undone}" if undone else ""))
        raise
