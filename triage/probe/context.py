"""What every probe sees: the located checkpoint, the target, and shard metadata read once."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field

from triage.probe.checkpoint import Checkpoint, TagListing, locate
from triage.probe.layout import SavedLayout, first_model_file, first_optim_file, saved_layout
from triage.probe.safe_pickle import ShardMeta, read_shard
from triage.probe.target import Target


@dataclass
class ProbeContext:
    ckpt: Checkpoint
    target: Target = field(default_factory=Target)
    deep: bool = False
    reproduce: bool = False  # also run DeepSpeed's own load (checks/reproduce.py)
    model_factory: str | None = None  # MODULE:FUNCTION building the model for that load
    trust_checkpoint: bool = False  # --trust-checkpoint: load even files the trust gate cannot verify (trust.py)
    host_memory: int | None = None  # bytes the loading node has (--host-memory), when not this host
    ranks_per_node: int | None = None  # ranks loading on one node (--ranks-per-node)
    as_user: object = None  # triage.probe.as_user.Identity the permission probe checks as (--as-user)
    timeout: float | None = None  # --timeout: seconds the real load (--reproduce) may take before it is killed
    known_bugs: tuple = ()  # (rule id, triage.kb.releases.BugReleases) of the known_bug hypotheses (checks/version.py)
    _meta: dict[str, ShardMeta] = field(default_factory=dict, repr=False)
    _layout: SavedLayout | None = field(default=None, repr=False)
    results: dict = field(default_factory=dict, repr=False)  # name -> ProbeResult of probes already run
    deep_scan: object = field(default=None, repr=False)  # --deep's one pass over the tag (deep_scan.scan)

    @classmethod
    def for_path(cls, path: str, target: Target | None = None, deep: bool = False, **options) -> "ProbeContext":
        """options: reproduce, model_factory, trust_checkpoint, host_memory, ranks_per_node, as_user, timeout."""
        return cls(ckpt=locate(path), target=target or Target(), deep=deep, **options)

    @property
    def listing(self) -> TagListing | None:
        return self.ckpt.listing()

    def run_probe(self, module):
        """One check (a module of probe/checks/) on this context; an evidence-only context answers the
        checks that need the disk from pasted output instead (triage/evidence/virtual.py)."""
        return module.probe(self)

    def shard_path(self, name: str) -> str:
        return os.path.join(self.ckpt.tag_dir, name)

    def meta(self, name: str) -> ShardMeta:
        path = self.shard_path(name)
        if path not in self._meta:
            self._meta[path] = read_shard(path)
        return self._meta[path]

    def layout(self) -> SavedLayout | None:
        listing = self.listing
        if listing is None or not listing.exists or listing.error:
            return None
        if self._layout is None:
            model, optim = first_model_file(listing), first_optim_file(listing)
            self._layout = saved_layout(listing, self.meta(model.name) if model else None,
                                        self.meta(optim.name) if optim else None)
        return self._layout

    def q(self, *parts: str) -> str:
        """A shell-quoted path under the root (for the commands a person can run)."""
        base = self.ckpt.root or os.path.abspath(self.ckpt.given)
        return shlex.quote(os.path.join(base, *parts))
