"""What a repair will do (Plan), the options it takes, and the checks that verify it.

A Plan is data: the dry run prints it, --apply executes it, --json emits it
(docs/schemas/repair.schema.json). Paths in it are final paths; the staging dir the result is
written into first is named in `staging` and renamed to `out` when the action has finished.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field

from triage.errors import TriageError
from triage.probe.context import ProbeContext
from triage.repair import EXIT_NOT_REPAIRED


class Refused(TriageError):
    """The action cannot be made on this checkpoint (or would overwrite something)."""

    exit_code = EXIT_NOT_REPAIRED


@dataclass
class Options:
    out: str | None = None
    tag: str | None = None
    config: str | None = None  # the user's ds_config (JSON)
    world_size: int | None = None  # ranks the verifying load runs on
    model_factory: str | None = None  # MODULE:FUNCTION for the real DeepSpeed load
    safetensors: bool = False
    max_shard_size: str | None = None
    trust_checkpoint: bool = False  # --trust-checkpoint: convert/load files the trust gate cannot verify
    timeout: float | None = None  # --timeout: seconds each tool and the verifying load may run before they are killed


@dataclass
class LoadSpec:
    """The real DeepSpeed load that verifies a result (triage/repair/load_check.py runs it)."""
    mode: str  # resume | module-only | universal | state-dict
    load_dir: str
    tag: str | None
    world_size: int
    config: dict
    config_source: str
    state_dict: str | None = None  # fp32: the dir holding the consolidated weights

    def to_json(self) -> dict:
        return {"mode": self.mode, "load_dir": self.load_dir, "tag": self.tag, "world_size": self.world_size,
                "config_source": self.config_source, "state_dict": self.state_dict}


@dataclass
class Check:
    name: str
    ok: bool
    detail: str

    def to_json(self) -> dict:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


@dataclass
class Plan:
    action: str
    root: str
    tag: str | None
    out: str | None  # the result: a new dir or file; for `latest` the `latest` file itself
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)  # new paths
    replaces: list[str] = field(default_factory=list)  # edited in place (only `latest`)
    backups: list[str] = field(default_factory=list)
    commands: list[list[str]] = field(default_factory=list)  # DeepSpeed's tools; "{staging}" is substituted
    steps: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    how_to_load: list[str] = field(default_factory=list)
    load: LoadSpec | None = None
    staging: str | None = None
    data: dict = field(default_factory=dict)  # the action's own values (new tag, config, layout facts)
    timeout: float | None = None  # --timeout for the tools it runs (triage/repair/tools.py)

    def shown_commands(self) -> list[str]:
        return [" ".join(shlex.quote(a.replace("{staging}", self.staging or "")) for a in c) for c in self.commands]

    def to_json(self) -> dict:
        return {"action": self.action, "checkpoint": self.root, "tag": self.tag, "out": self.out,
                "staging": self.staging, "reads": self.reads, "writes": self.writes, "replaces": self.replaces,
                "backups": self.backups, "commands": self.shown_commands(), "steps": self.steps, "notes": self.notes,
                "how_to_load": self.how_to_load, "load_check": self.load.to_json() if self.load else None}


@dataclass
class Source:
    """The checkpoint to repair, located and read through the probe layer."""
    ctx: ProbeContext
    given: str

    @classmethod
    def locate(cls, path: str, tag: str | None = None) -> "Source":
        ctx = ProbeContext.for_path(path)
        ckpt = ctx.ckpt
        if ckpt.root is None:
            raise Refused(f"{path}: not a DeepSpeed checkpoint ({ckpt.given_kind.replace('_', ' ')}): give the "
                          "checkpoint root (the dir holding `latest` and the tag dirs) or a tag dir")
        if tag is not None:
            if not os.path.isdir(os.path.join(ckpt.root, tag)):
                raise Refused(f"--tag {tag}: no such tag dir in {ckpt.root} (tags: {', '.join(ckpt.tags) or 'none'})")
            ckpt.tag, ckpt.tag_source = tag, "given"
        return cls(ctx, path)

    @property
    def root(self) -> str:
        return self.ctx.ckpt.root

    @property
    def tag(self) -> str | None:
        return self.ctx.ckpt.tag

    @property
    def tag_dir(self) -> str:
        return os.path.join(self.root, self.tag)

    def require_tag(self) -> str:
        """The tag to read, which must exist and be listable."""
        listing = self.ctx.listing
        if self.tag is None or listing is None or not listing.exists:
            raise Refused(f"{self.root}: no tag to read" + (f" (`latest` names {self.tag!r}, which does not exist; "
                          "run `ds-triage repair latest` first or pass --tag)" if self.tag else ""))
        if listing.error:
            raise Refused(f"cannot list {listing.path}: {listing.error}")
        return self.tag

    def layout(self):
        layout = self.ctx.layout()
        if layout is None:
            raise Refused(f"{self.tag_dir}: its layout cannot be read")
        return layout


def default_out(source: Source, suffix: str) -> str:
    """A sibling of the checkpoint root named after the action: /ckpt/run1 -> /ckpt/run1-fp32."""
    return os.path.normpath(source.root) + f"-{suffix}"


def new_path(out: str, what: str) -> str:
    """`out`, refusing one that exists (never overwritten)."""
    out = os.path.abspath(out)
    if os.path.lexists(out):
        raise Refused(f"{what} {out} exists; ds-triage never overwrites: remove it or pass another --out")
    parent = os.path.dirname(out)
    if not os.path.isdir(parent):
        raise Refused(f"{what} {out}: its parent dir {parent} does not exist")
    return out


def staging_for(out: str) -> str:
    return f"{out}.ds-triage-partial"


def inside(path: str, root: str) -> bool:
    path, root = os.path.realpath(path), os.path.realpath(root)
    return path == root or path.startswith(root + os.sep)


def refuse_inside(out: str, source: Source) -> None:
    """An output inside the checkpoint would be a write into it."""
    if inside(out, source.root):
        raise Refused(f"--out {out} is inside the checkpoint {source.root}; write the result beside it")
