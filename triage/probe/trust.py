"""The trust gate: before anything loads a checkpoint for real (torch.load, DeepSpeed, its converters),
every file that load would open is walked by the restricted reader, and the load is refused unless
each one is verified safe.

Which files: every `.pt` of the tag dir that DeepSpeed's own globs pick up (zero_to_fp32 and the
universal converter glob `*_model_states.pt` / `*_optim_states.pt`; the engine opens names with
those suffixes), plus every shard our own layout parser recognises. A file is

* safe: a whole zip (or legacy non-zip) torch.save whose pickle names only DeepSpeed's globals;
* suspicious: its pickle names anything else (torch.load(weights_only=False) would run it);
* unverifiable: it cannot be opened, is damaged, or its pickle cannot be followed.

`--trust-checkpoint` lets the load go ahead anyway; the report then names what was not verified.
stdlib only, like the reader: the gate itself never imports torch.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field

from triage.errors import EXIT_UNTRUSTED, TriageError
from triage.probe import zipcheck
from triage.probe.checkpoint import parse_name
from triage.probe.safe_pickle import read_legacy_shard, read_shard

# deepspeed/utils/zero_to_fp32.py (get_model_state_files, get_optim_files) and
# deepspeed/checkpoint/ds_to_universal.py; engine.py builds names ending in the same suffixes.
DEEPSPEED_GLOBS = ("*_model_states.pt", "*_optim_states.pt")
FLAG = "--trust-checkpoint"


class Untrusted(TriageError):
    """A file the load would open is not verified safe, and --trust-checkpoint was not given."""

    exit_code = EXIT_UNTRUSTED


@dataclass
class FileVerdict:
    name: str
    verdict: str  # safe | suspicious | unverifiable
    detail: str = ""


@dataclass
class TrustReport:
    tag_dir: str
    files: list[FileVerdict] = field(default_factory=list)

    @property
    def untrusted(self) -> list[FileVerdict]:
        return [f for f in self.files if f.verdict != "safe"]

    def describe(self, limit: int = 3) -> str:
        bad = self.untrusted
        shown = "; ".join(f"{f.name}: {f.verdict} ({f.detail})" for f in bad[:limit])
        return shown + (f"; and {len(bad) - limit} more" if len(bad) > limit else "")

    def trusted_note(self) -> str | None:
        """What the report says when the load went ahead with --trust-checkpoint."""
        if not self.untrusted:
            return None
        return f"loaded with {FLAG}: {len(self.untrusted)} file(s) not verified safe: {self.describe()}"

    def to_json(self) -> dict:
        return {"tag_dir": self.tag_dir, "checked": len(self.files),
                "untrusted": [{"name": f.name, "verdict": f.verdict, "detail": f.detail} for f in self.untrusted]}


def loaded_files(tag_dir: str) -> list[str]:
    """The names in tag_dir that DeepSpeed or a converter would open (sorted)."""
    try:
        names = os.listdir(tag_dir)
    except OSError:
        return []
    return sorted(n for n in names
                  if any(fnmatch.fnmatchcase(n, g) for g in DEEPSPEED_GLOBS) or parse_name(n) is not None)


def scan(tag_dir: str) -> TrustReport:
    report = TrustReport(tag_dir)
    try:
        os.listdir(tag_dir)
    except OSError as exc:
        report.files.append(FileVerdict(os.path.basename(tag_dir) or tag_dir, "unverifiable",
                                        f"cannot list the tag dir: {exc.strerror or exc}"))
        return report
    for name in loaded_files(tag_dir):
        report.files.append(judge(os.path.join(tag_dir, name)))
    return report


def judge(path: str) -> FileVerdict:
    name = os.path.basename(path)
    z = zipcheck.check(path)
    if z.unreadable:
        return FileVerdict(name, "unverifiable", f"cannot open it: {z.unreadable}")
    if z.problem:
        return FileVerdict(name, "unverifiable", f"{z.problem}: {z.detail}")
    meta = read_legacy_shard(path) if z.legacy else read_shard(path)
    fmt = "legacy-format " if z.legacy else ""
    if meta.over_cap:  # built to exhaust a reader: as hostile as a payload
        return FileVerdict(name, "suspicious", f"its {fmt}pickle goes over the safe reader's cap ({meta.over_cap})")
    if meta.error:
        return FileVerdict(name, "unverifiable", f"its {fmt}pickle cannot be followed: {meta.error}")
    if meta.suspicious:
        return FileVerdict(name, "suspicious", f"its {fmt}pickle names {', '.join(meta.suspicious[:3])}, "
                           "which loading would run")
    return FileVerdict(name, "safe")


def gate(tag_dir: str, trust: bool, what: str) -> TrustReport:
    """Refuse (Untrusted) unless every file `what` would load is safe or `trust` is set; the report
    (trusted_note) then names what went unverified."""
    report = scan(tag_dir)
    if report.untrusted and not trust:
        raise Untrusted(f"{what} refused: {len(report.untrusted)} file(s) of {tag_dir} not verified safe "
                        f"({report.describe()}); loading would run or read them. Nothing was loaded; pass {FLAG} "
                        "only if you trust where this checkpoint came from")
    return report
