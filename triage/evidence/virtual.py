"""A checkpoint known only from pasted listings: names, sizes, modes and owners, no file read.

VirtualCheckpoint has Checkpoint's interface (listing(tag), latest, tags, has_tag_dir), so the
completeness, latest and config checks run on it unchanged (VirtualContext.run_probe); the checks
that must touch the disk (path, permission, integrity, memory) answer from the evidence instead
(triage/evidence/probes.py). A shard's pickle is never read: its metadata is "not read".

Roles: when the paste lists a tag's files and the dir above it, that tag is taken as the one the job
loads (the deciding question asks for exactly that: `ls -la CKPT CKPT/TAG`) and the dir above as its
load dir, as `probe TAGDIR --load-dir CKPT` would be told; a listing of the root alone is `probe CKPT`.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from triage.evidence.listing import Entry
from triage.probe.checkpoint import Checkpoint, Latest, TagListing, parse_name, step_key
from triage.probe.context import ProbeContext
from triage.probe.safe_pickle import ShardMeta

NOT_SHOWN = "not in the pasted evidence"
NOT_READ = "not read: only its listing was pasted"
MISSING, DENIED = "No such file or directory", "Permission denied"


@dataclass
class Files:
    """Every path the listings named, merged (a later listing fills what an earlier one left out)."""

    entries: dict[str, Entry] = field(default_factory=dict)
    listed: set = field(default_factory=set)  # dirs whose contents were shown

    def add(self, entry: Entry) -> None:
        path = posixpath.normpath(entry.path) if entry.path not in ("", ".") else "."
        known = self.entries.get(path)
        if known is None:
            self.entries[path] = Entry(**{**entry.__dict__, "path": path})
        else:
            for name, value in entry.__dict__.items():
                if getattr(known, name) in (None, "?") and value not in (None, "?"):
                    setattr(known, name, value)
        parent = posixpath.dirname(path)
        if entry.shows_self:
            self.listed.add(path)
        elif entry.shows_parent and path != "/" and parent and parent != path:
            self.listed.add(parent)

    def children(self, path: str) -> list[Entry]:
        return [e for p, e in self.entries.items() if posixpath.dirname(p) == path and p != path]

    def is_dir(self, path: str) -> bool:
        entry = self.entries.get(path)
        return (entry is not None and entry.type == "d") or path in self.listed


@dataclass
class VirtualCheckpoint(Checkpoint):
    files: Files = field(default_factory=Files, repr=False)

    def listing(self, tag: str | None = None) -> TagListing | None:
        tag = tag or self.tag
        if self.root is None or tag is None:
            return None
        path = posixpath.join(self.root, tag)
        if path not in self.files.listed:
            exists = self.has_tag_dir(tag)
            listing = TagListing(tag=tag, path=path, exists=exists is not False)
            entry = self.files.entries.get(path)
            if entry is not None and entry.error == DENIED:
                listing.error = f"PermissionError: {DENIED} (ls, as pasted)"
            elif exists is not False:
                listing.error = f"its files are {NOT_SHOWN} (ls -la {path})"
            return listing
        listing = TagListing(tag=tag, path=path, exists=True)
        for entry in sorted(self.files.children(path), key=lambda e: e.name):
            shard = parse_name(entry.name)
            if shard and entry.type in ("-", "?"):
                listing.shards.append(shard)
            elif entry.name == "zero" and self.files.is_dir(entry.path):
                listing.universal = True
            elif entry.type == "l" or entry.type in "pcbs":
                listing.refused[entry.name] = _refusal(entry, path)
            else:
                listing.other.append(entry.name)
        return listing

    def has_tag_dir(self, name: str) -> bool | None:
        """True, False, or None when the root's contents were not shown."""
        path = posixpath.join(self.root, name)
        entry = self.files.entries.get(path)
        if entry is not None and entry.error == MISSING:
            return False
        if self.files.is_dir(path):
            return True
        return False if self.root in self.files.listed else None

    def entry(self, *parts: str) -> Entry | None:
        return self.files.entries.get(posixpath.join(self.root or "", *parts))


def _refusal(entry: Entry, root: str) -> str:
    if entry.type == "l":
        target = posixpath.normpath(posixpath.join(root, entry.link or ""))
        if not (target + "/").startswith(root.rstrip("/") + "/"):
            return f"a symlink to {entry.link}, which leads outside the checkpoint root: not followed"
        return f"a symlink to {entry.link}: not read from a listing"
    return {"p": "a FIFO", "c": "a character device", "b": "a block device", "s": "a socket"}[entry.type] + \
        ": not a regular file"


def build(entries: list[Entry], latest_text: str | None) -> VirtualCheckpoint | None:
    """The checkpoint the listings show, or None when they show no DeepSpeed shard and no `latest`."""
    files = Files()
    for entry in _anchored(entries, latest_text):
        files.add(entry)
    tag_dirs = sorted({posixpath.dirname(p) for p, e in files.entries.items() if parse_name(e.name)
                       and e.type in ("-", "?")} | {p for p, e in files.entries.items() if e.error == DENIED
                                                    and (posixpath.basename(p).startswith("global_step")
                                                         or posixpath.basename(p) == (latest_text or "").strip())},
                      key=lambda p: step_key(posixpath.basename(p)))
    roots = [posixpath.dirname(p) for p in files.entries if posixpath.basename(p) == "latest"] + \
        sorted(p for p in files.listed if any(files.is_dir(c.path) and _tag_like(files, c) for c in files.children(p)))
    # ls refused every dir asked for (`cannot access CKPT: Permission denied`): the first, CKPT, is the root
    denied = sorted((p for p, e in files.entries.items() if e.error == DENIED), key=len)
    if not tag_dirs and not roots and not denied:
        return None
    root = posixpath.dirname(tag_dirs[-1]) if tag_dirs else roots[0] if roots else denied[0]
    mine = [d for d in tag_dirs if posixpath.dirname(d) == root]
    shown_root = root in files.listed and any(e.name == "latest" or files.is_dir(e.path) for e in files.children(root))
    ckpt = VirtualCheckpoint(given=root, given_kind="root", root=root, files=files)
    ckpt.tags = sorted({posixpath.basename(d) for d in mine}
                       | {e.name for e in files.children(root) if files.is_dir(e.path) and _tag_like(files, e)},
                       key=step_key)
    ckpt.latest = _latest(ckpt, latest_text, shown_root)
    if len(mine) == 1 and (shown_root or root not in files.listed):
        # one tag's files pasted: the tag the job loads (see the module doc)
        ckpt.given, ckpt.given_kind = mine[0], "tag_dir"
        ckpt.tag, ckpt.tag_source = posixpath.basename(mine[0]), "given"
    elif ckpt.latest.text and ckpt.latest.text in ckpt.tags:
        ckpt.tag, ckpt.tag_source = ckpt.latest.text, "latest"
    elif ckpt.tags:
        ckpt.tag, ckpt.tag_source = ckpt.tags[-1], "newest"
    return ckpt


def _anchored(entries: list[Entry], latest_text: str | None) -> list[Entry]:
    """Rows of a listing made where the paste does not say (`ls -la` in the dir itself, `find .`) placed
    under stand-ins: the dir listed is …/CKPT, or …/CKPT/TAG when it holds shards (TAG: what `latest`
    names, when pasted)."""
    relative = [e for e in entries if not e.path.startswith("/")]
    if not relative:
        return entries
    direct = {e.path.removeprefix("./") for e in relative if "/" not in e.path.removeprefix("./")}
    here = f"…/CKPT/{latest_text or 'TAG'}" if any(parse_name(n) for n in direct) else "…/CKPT"
    out = []
    for e in entries:
        if not e.path.startswith("/"):
            rest = e.path.removeprefix("./")
            path = here if rest == "." else posixpath.dirname(here) if rest == ".." else posixpath.join(here, rest)
            e = Entry(**{**e.__dict__, "path": path})
        out.append(e)
    return out


def _tag_like(files: Files, entry: Entry) -> bool:
    return entry.name.startswith("global_step") or any(parse_name(c.name) for c in files.children(entry.path))


def _latest(ckpt: VirtualCheckpoint, text: str | None, shown_root: bool) -> Latest:
    latest = Latest(path=posixpath.join(ckpt.root, "latest"))
    entry = ckpt.entry("latest")
    if text is not None:
        latest.exists, latest.text = True, text
    elif shown_root and entry is None:
        latest.exists = False
    else:
        # there (or not known): what it names was not shown; the latest check stays inconclusive
        latest.exists = True
        latest.error = f"what it names is {NOT_SHOWN} (cat {latest.path})"
    if entry is not None and entry.size == 0 and text is None:
        latest.exists, latest.text, latest.error = True, "", None  # an empty file names nothing
    return latest


class VirtualContext(ProbeContext):
    """A ProbeContext over a VirtualCheckpoint and the other evidence: no file is opened."""

    evidence: list = []  # set per instance: the Evidence items besides the listings

    def meta(self, name: str) -> ShardMeta:
        """What a pasted `ds-triage inspect` of this file showed, else not read (only its name is known)."""
        from triage.evidence.saved import shard_meta

        for item in self.evidence:
            where, _, base = item.facts.get("file", "").rpartition("/") if item.kind == "inspect" else ("", "", "")
            if base == name and (not where or posixpath.basename(where) in (self.ckpt.tag, "TAG")):
                return shard_meta(item.facts, self.shard_path(name))
        return ShardMeta(path=self.shard_path(name), error=NOT_READ)

    def run_probe(self, module):
        from triage.evidence import probes

        return probes.run(self, module)
