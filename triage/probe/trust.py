"""The trust gate: before anything loads a checkpoint for real (torch.load, DeepSpeed, its converters),
every file that load would open is walked by the restricted reader, and the load is refused unless
each one is verified safe.

Which files (triage/probe/load_files.py): every file under the tag asked for and under the tags
`latest` and `latest_universal` name, recursively (`zero/`, nested `mp_rank_*`): what DeepSpeed's
engine, its universal load, zero_to_fp32 and ds_to_universal open, whatever the config. A file is
judged when a loader could unpickle it (a name DeepSpeed loads, or torch's zip or legacy magic) and is

* safe: a whole zip (or legacy non-zip) torch.save whose pickle names only DeepSpeed's globals;
* suspicious: its pickle names anything else (torch.load(weights_only=False) would run it);
* unverifiable: it cannot be opened (outside the root, a hard link out, no regular file), is damaged,
  or its pickle cannot be followed.

Every file is opened through confine.open_regular with the checkpoint root: one that leads out of it
is refused without a byte read. `--trust-checkpoint` lets the load go ahead anyway; the report then
names what was not verified. stdlib only, like the reader: the gate itself never imports torch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from triage.errors import EXIT_UNTRUSTED, TriageError
from triage.probe import confine, zipcheck
from triage.probe.load_files import POINTERS, Discovery, add_tag, discover, loadable
from triage.probe.legacy_pickle import read_legacy_shard
from triage.probe.safe_pickle import read_shard

FLAG = "--trust-checkpoint"
MAX_UNTRUSTED = 64  # past this many, the verdict is made: the rest is not read (a tag of 10^5 hard links)
TORCH_MAGIC = (zipcheck.LOCAL_HEADER, zipcheck.LEGACY_MAGIC)


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
    tag_dir: str  # what the names are relative to: the tag read (or the checkpoint root, with no tag)
    tags: list[str] = field(default_factory=list)  # the tags walked
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
        return {"tag_dir": self.tag_dir, "tags": self.tags, "checked": len(self.files),
                "untrusted": [{"name": f.name, "verdict": f.verdict, "detail": f.detail} for f in self.untrusted]}


def scan(tag_dir: str, root: str | None = None) -> TrustReport:
    """One tag dir, recursively (names relative to it); nothing may lead out of `root` (default: the tag dir)."""
    found = Discovery(root or tag_dir)
    add_tag(found.root, tag_dir, found)
    return judge_all(found, tag_dir)


def scan_load(root: str, tag: str | None = None, pointers=POINTERS) -> TrustReport:
    """Every file a load of `root` may open: `tag`, and the tags `pointers` name. Names are relative to
    the first of those tags (`../global_step9/...` for another tag's file, `../latest` for a pointer)."""
    found = discover(root, tag, pointers)
    first = tag or (found.tags[0] if found.tags else None)
    return judge_all(found, os.path.join(root, first) if first else root)


def judge_all(found: Discovery, base: str) -> TrustReport:
    report = TrustReport(base, tags=found.tags)
    for path, why in found.refused.items():
        report.files.append(FileVerdict(_name(path, base), "unverifiable", why))
    for path in found.files:
        if len(report.untrusted) >= MAX_UNTRUSTED:
            report.files.append(FileVerdict("...", "unverifiable", f"not read: {MAX_UNTRUSTED} files already failed"))
            break
        verdict = judge(path, found.root, _name(path, base))
        if verdict is not None:
            report.files.append(verdict)
    return report


def _name(path: str, base: str) -> str:
    rel = os.path.relpath(path, base)
    return os.path.basename(path) if rel == "." else rel


def judge(path: str, root: str, name: str | None = None) -> FileVerdict | None:
    """The verdict on one file, opened only confined to `root`; None when no loader would unpickle it
    (its name is none DeepSpeed loads and it does not start as a torch file)."""
    name = name or os.path.basename(path)
    try:
        with confine.open_regular(path, root) as f:
            head = f.read(len(zipcheck.LEGACY_MAGIC))
    except OSError as exc:  # outside the root, a hard link out, no regular file: not a byte read
        if not loadable(os.path.basename(path)):
            return None  # no loader opens it by that name, and what it holds cannot be seen
        return FileVerdict(name, "unverifiable", f"cannot open it: {exc.strerror or exc}")
    if not loadable(os.path.basename(path)) and not head.startswith(TORCH_MAGIC):
        return None
    real = os.path.realpath(path)  # vetted above: inside the root, a regular file
    z = zipcheck.check(real)
    if z.unreadable:
        return FileVerdict(name, "unverifiable", f"cannot open it: {z.unreadable}")
    if z.problem:
        return FileVerdict(name, "unverifiable", f"{z.problem}: {z.detail}")
    meta = read_legacy_shard(real) if z.legacy else read_shard(real)
    fmt = "legacy-format " if z.legacy else ""
    if meta.over_cap:  # built to exhaust a reader: as hostile as a payload
        return FileVerdict(name, "suspicious", f"its {fmt}pickle goes over the safe reader's cap ({meta.over_cap})")
    if meta.error:
        return FileVerdict(name, "unverifiable", f"its {fmt}pickle cannot be followed: {meta.error}")
    if meta.suspicious:
        return FileVerdict(name, "suspicious", f"its {fmt}pickle names {', '.join(meta.suspicious[:3])}, "
                           "which loading would run")
    return FileVerdict(name, "safe")


def gate(root: str, tag: str | None, trust: bool, what: str, pointers=POINTERS) -> TrustReport:
    """Refuse (Untrusted) unless every file a load of `root` (`tag`, and the tags `pointers` name) would
    open is safe, or `trust` is set; the report (trusted_note) then names what went unverified."""
    report = scan_load(root, tag, pointers)
    if report.untrusted and not trust:
        raise Untrusted(f"{what} refused: {len(report.untrusted)} file(s) of {report.tag_dir} not verified safe "
                        f"({report.describe()}); loading would run or read them. Nothing was loaded; pass {FLAG} "
                        "only if you trust where this checkpoint came from")
    return report
