"""The deciding question: when the open causes differ in category, the one read-only command whose
output best tells them apart, in the seeds' order path -> permission -> integrity -> version ->
config, with the paths filled in and what each possible answer would mean.

Pure: it takes the open hypotheses, what the log already says (the probe target) and the kinds of
evidence already pasted, and never asks for a fact either one gave. Used by the chat and by
`classify`'s report ("to decide, run: ...").
"""

from __future__ import annotations

import shlex

from triage.record import Record

PHASES = ("path", "permission", "integrity", "version", "config")
PHASE_OF = {"missing_file": "path", "partial_checkpoint": "path", "permission_denied": "permission",
            "corrupt_file": "integrity", "unsafe_load_blocked": "integrity", "version_incompatible": "version",
            "known_bug": "version", "zero_stage_mismatch": "config", "parallelism_mismatch": "config",
            "config_mismatch": "config"}
# What each command's output decides (the categories it can confirm or refute), and the evidence kind
# it is read as (asked once: never again when that kind was pasted).
ASKS = (
    ("listing", "path", {"missing_file", "partial_checkpoint", "permission_denied", "corrupt_file",
                         "zero_stage_mismatch", "parallelism_mismatch"}),
    ("namei", "permission", {"permission_denied"}),
    ("head", "integrity", {"corrupt_file"}),
    ("versions", "version", {"version_incompatible", "known_bug"}),
    ("config", "config", {"zero_stage_mismatch", "parallelism_mismatch", "config_mismatch"}),
    # the saved side: a listing of mp_rank_00 files alone is a ZeRO-0 save or a ZeRO-1/2 one whose
    # optimizer shards are gone; only the file's saved ds_config tells them apart
    ("inspect", "config", {"zero_stage_mismatch", "missing_file", "partial_checkpoint", "parallelism_mismatch",
                           "config_mismatch"}),
)
MEANS = {
    "missing_file": "no tag dir, or no *_model_states.pt in it, or `latest` naming a tag that is not there: "
                    "a missing file (the wrong dir or tag)",
    "partial_checkpoint": "the newest tag short of shards while `latest` names an older one: a save that died",
    "permission_denied": "a dir or file without read (r) for the job's user, or ls itself refused: permissions",
    "corrupt_file": "a shard of 0 bytes or far smaller than its siblings: a damaged file",
    "zero_stage_mismatch": "zero_pp_rank_*_mp_rank_*_model_states.pt and no mp_rank_00_model_states.pt: a ZeRO-3 "
                           "save, loaded by a ZeRO-0/1/2 engine (or mp_rank_00 files only, loaded by ZeRO-3)",
    "parallelism_mismatch": "a count of zero_pp_rank_N files other than the loading world size: another world size",
    "version_incompatible": "a deepspeed release other than the one that saved it: a version skew",
    "known_bug": "a release among the rule's affected ones: the known bug",
    "config_mismatch": "a precision or universal-checkpoint setting other than the saved one",
}
SAVED_MEANS = {  # what `ds-triage inspect` of the model states shows (its saved ds_config and world sizes)
    "zero_stage_mismatch": "a saved zero_optimization.stage other than the loading job's: a stage mismatch",
    "missing_file": "a saved stage 1 or 2 where the listing shows no zero_pp_rank_*_optim_states.pt: "
                    "the optimizer shards are missing",
    "partial_checkpoint": "a saved stage 1 or 2 with its optimizer shards not all there: a save that died",
    "parallelism_mismatch": "a dp_world_size or mp_world_size other than the loading job's: another world size",
    "config_mismatch": "a saved precision (bf16/fp16) other than the loading job's",
}


class Question(Record):
    _fields = ("command", "phase", "kind", "means", "placeholders")

    def __init__(self, command: str, phase: str, kind: str, means: list[str] | None = None,
                 placeholders: list[str] | None = None):
        self.command, self.phase = command, phase
        self.kind = kind  # the evidence kind the answer is read as
        self.means = [] if means is None else means  # "if it shows X: Y"
        self.placeholders = [] if placeholders is None else placeholders  # what CKPT / TAG stand for, when not known

    def text(self) -> str:
        lines = ["To tell these causes apart, run this where the checkpoint is, as the job's user, and paste "
                 "the output here:", f"  {self.command}"]
        lines += [f"  ({p})" for p in self.placeholders]
        lines += ["If it shows:"] + [f"  - {m}" for m in self.means]
        return "\n".join(lines)

    def one_line(self) -> str:
        return f"to decide, run: {self.command}"


def deciding(categories: list[str], target=None, seen: set | None = None, ckpt: str | None = None,
             tag: str | None = None) -> Question | None:
    """categories: the open hypotheses' (best first); target: what the log says of the load (a
    probe Target); seen: the evidence kinds already pasted; ckpt, tag: the load dir and tag if known."""
    seen = seen or set()
    open_ = [c for c in dict.fromkeys(categories) if c != "unknown"]
    if len(open_) < 2:
        # a lone cause is not asked about: measured, its answers struck off right causes the log alone
        # had (the latest check reads the root's `latest`, not the dir a converter was given)
        return None
    for kind, phase, decides in sorted(ASKS, key=lambda a: PHASES.index(a[1])):
        if kind in seen or (kind == "versions" and target is not None and target.ds_version) \
                or (kind == "config" and target is not None and target.stage is not None):
            continue  # pasted already, or the log gave it
        told = [c for c in open_ if c in decides]
        if told and (len(told) >= 2 or any(PHASE_OF.get(c) != PHASE_OF.get(told[0]) for c in open_)):
            command, placeholders = _command(kind, ckpt, tag)
            means = SAVED_MEANS if kind == "inspect" else MEANS
            return Question(command, phase, kind, [means[c] for c in told if c in means], placeholders)
    return None


def for_report(report, log_text: str) -> Question | None:
    """The deciding question for a classification alone (`classify`'s "to decide, run: ...")."""
    if not report.hypotheses or not report.is_checkpoint_failure:
        return None
    categories = [h.rule.category for h in report.hypotheses[:3]]
    if len({c for c in categories if c != "unknown"}) < 2:
        return None  # one cause: nothing to decide, and no need to read the log again (deciding's own test)
    from triage.probe.target import from_args  # the probe's reading of the log: ~20 ms, only when asked

    target = from_args(None, None, None, log_text)
    return deciding(categories, target, set(),
                    report.facts.get("ckpt") or target.load_dir, report.facts.get("tag") or target.load_tag)


def _command(kind: str, ckpt: str | None, tag: str | None) -> tuple[str, list[str]]:
    root = shlex.quote(ckpt) if ckpt else "CKPT"
    where = f"{root}/{shlex.quote(tag)}" if tag else f"{root}/TAG"
    notes = [] if ckpt else ["CKPT: the dir the job passes to load_checkpoint / --load"]
    if not tag:
        notes.append("TAG: the tag it loads: the one CKPT/latest names, unless the job passes tag=")
    command = {
        "listing": f"cat {root}/latest; echo; ls -la {root} {where}",
        "namei": f"id; namei -l {where}",
        "head": f"ls -la {where}; head -c 64 {where}/*_model_states.pt | head -c 300",
        "versions": "pip show deepspeed torch",
        "config": "cat ds_config.json   (the loading job's ds_config)",
        "inspect": f"ds-triage inspect {where}/mp_rank_00_model_states.pt",
    }[kind]
    if kind in ("versions", "config"):
        notes = []
    return command, notes
