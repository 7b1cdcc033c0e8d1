"""The checks that need the disk, answered from pasted output with the same signals (verdict.py).

completeness, latest and config run their own code on the virtual checkpoint (they read names only).
path: the listing shows the dir and its shards, and whether a symlink leads out. permission: the
modes and owners shown, against `id` (or, without it, what any user may do), and the fact that the
listing itself was made. integrity: a 0-byte shard, a size far below its siblings', a `head -c` that
shows a Git LFS pointer or an HTML page; no byte of a shard is read, so it never refutes. memory:
the kernel's OOM killer. Everything else is inconclusive: not in the evidence.
"""

from __future__ import annotations

import posixpath

from triage.probe.result import ProbeResult, outcome

BY_NAME = ("completeness", "latest", "config")  # their own code runs on the virtual checkpoint


def run(ctx, module) -> ProbeResult:
    name = module.NAME if hasattr(module, "NAME") else module.__name__.rsplit(".", 1)[-1]
    if name in BY_NAME:
        return module.probe(ctx)
    own = {"path": path, "permission": permission, "integrity": integrity, "memory": memory}.get(name)
    if own is not None:
        return own(ctx)
    return outcome(name, signals=[], checked=[], complete=False, found="", clear="",
                   unknown=f"not in the pasted evidence (run ds-triage probe on the host that has the checkpoint)",
                   evidence=[], command="")


def _facts(ctx, kind: str) -> list[dict]:
    return [e.facts for e in ctx.evidence if e.kind == kind]


def path(ctx) -> ProbeResult:
    ckpt, target = ctx.ckpt, ctx.target
    signals, checked, evidence, context = [], ["not_found", "no_checkpoint", "no_deepspeed_state"], [], []
    listing, shown = ctx.listing, True
    if listing is None or not (listing.shards or listing.universal):
        if listing is not None and listing.error:
            shown = False  # ls refused the tag dir, or it was not listed: what it holds is not shown
            context.append(f"tag {ckpt.tag}: {listing.error}")
        elif ckpt.root is None or ckpt.root not in ckpt.files.listed:
            shown = False  # ls was refused, or no listing: what the dir holds is not shown
            context.append(f"{ckpt.given}: its contents are not in the pasted evidence")
        else:
            signals.append("no_checkpoint")
            evidence.append(f"{ckpt.given}: the listing shows no tag dir with DeepSpeed shards")
    context.append(f"checkpoint root: {ckpt.root} (from the pasted listing)")
    load_dir = posixpath.normpath(target.load_dir) if target.load_dir else None
    if load_dir and load_dir == posixpath.normpath(ckpt.tag_dir or ""):
        checked.append("wrong_level")
        signals.append("wrong_level")
        evidence.append(f"the load dir {target.load_dir} ({target.sources.get('load_dir', '?')}) is a tag dir "
                        f"(it holds the shards); load_checkpoint(dir) must be its parent {ckpt.root}")
    elif load_dir and load_dir == posixpath.normpath(ckpt.root or ""):
        checked.append("wrong_level")  # the dir the job loads is the listed root: the right level
    elif load_dir:  # the listing shows another dir than the one the job loads: its level is not shown
        context.append(f"the load dir {target.load_dir} is not the listed {ckpt.root}: its level is unknown")
    refused = dict(listing.refused) if listing else {}
    if listing and all(e.mode for e in ckpt.files.children(listing.path)):
        checked.append("unsafe_path")  # types and link targets are shown: what leads out is visible
    for name, why in refused.items():
        if "outside" in why or "not a regular file" in why:
            signals.append("unsafe_path")
            evidence.append(f"{ckpt.tag}/{name}: {why}")
    if not shown:
        checked = [c for c in checked if c not in ("not_found", "no_checkpoint", "no_deepspeed_state")]
    return outcome("path", signals=signals, checked=checked, complete=shown, found="the path is not what --load needs",
                   clear="the path is a DeepSpeed checkpoint root", unknown="the listing does not show the checkpoint",
                   evidence=evidence, context=context,
                   command=f"ls -la {ctx.q()}")


def permission(ctx) -> ProbeResult:
    ckpt, listing = ctx.ckpt, ctx.listing
    who = next(iter(_facts(ctx, "identity")), None)
    evidence, context, signals, complete = [], [], [], True
    dirs = [d for d in (ckpt.root, ckpt.tag_dir) if d]
    for d in dirs or [None]:  # no dir known: nothing was shown to be readable
        if d not in ckpt.files.listed:
            complete = False
    chain = _chain(ctx)
    if who is not None and not any(f["chain"] for f in _facts(ctx, "namei")):
        complete = False  # the dirs above the root's parent were not shown (namei -l shows them)
    for link in chain if who is not None else []:
        if _may(link["mode"], link["owner"], link["group"], who, "x") is False:
            signals.append("untraversable")
            evidence.append(f"{link['path']}: no execute (search) permission for {_who(who)}: nothing below it can be "
                            f"opened (mode {link['mode']}, owner {link['owner']}:{link['group']}, as pasted)")
            break
    for d in dirs:
        entry = ckpt.files.entries.get(d)
        if entry is not None and entry.error == "Permission denied" and not signals:
            signals.append("unlistable")
            by = _who(who) if who else "the user who ran it"
            evidence.append(f"{d}: ls: Permission denied (as pasted, run as {by}): "
                            "DeepSpeed's glob for the shards sees no file and reports them as missing")
    for d in dirs if who is not None and not signals else []:
        entry = ckpt.files.entries.get(d)
        if entry is not None and entry.mode and _may(entry.mode, entry.owner, entry.group, who, "r") is False:
            signals.append("unlistable")
            evidence.append(f"{d}: {_who(who)} cannot list it (mode {entry.mode}, owner {entry.owner}:{entry.group}): "
                            "DeepSpeed's glob for the shards sees no file and reports them as missing")
    files = [posixpath.join(listing.path, s.name) for s in listing.shards] if listing and not listing.error else []
    if signals:  # below a dir the job cannot enter or list, a file's own mode is beside the point
        files = []
    if ckpt.latest and ckpt.latest.exists and ckpt.entry("latest"):
        files.append(ckpt.latest.path)
    files += _framework_files(ckpt, files) if not signals else []
    for f in files:
        entry = ckpt.files.entries.get(f)
        if entry is None or entry.mode is None:
            complete = False
            continue
        verdict = _may(entry.mode, entry.owner, entry.group, who, "r")
        if verdict is False:
            signals.append("unreadable")
            evidence.append(f"{f}: mode {entry.mode}, owner {entry.owner}:{entry.group}: {_who(who)} may not read it"
                            + _squash(ctx, who, f))
        elif verdict is None:
            complete = False
            context.append(f"{f}: mode {entry.mode}, owner {entry.owner}: readable only by some users; paste `id` "
                           "as the job's user to tell")
    if not signals and who is None:
        context.insert(0, f"{', '.join(d for d in dirs if d in ckpt.files.listed)} listed, so traversable and listable "
                       "by whoever ran the listing (run it as the job's user, or paste `id` too); "
                       f"{len(files)} file(s) readable by their modes for {_who(who)}")
    elif not signals:
        context.insert(0, f"{len(chain)} dir(s) and {len(files)} file(s) open to {_who(who)} by the modes pasted")
    return outcome("permission", signals=signals, checked=["untraversable", "unlistable", "unreadable"] if complete else [],
                   complete=complete, found="something the load opens is not readable by " + _who(who),
                   clear="every directory, shard and framework file is reachable and readable",
                   unknown="the modes shown do not settle who may read every file", evidence=evidence,
                   context=context, command=f"namei -l {ctx.q(ckpt.tag or '')}; id")


def _chain(ctx) -> list[dict]:
    """The dirs from / (namei -l) or from the root's parent (the listings' `..` and `.`) down to the tag."""
    for facts in _facts(ctx, "namei"):
        if facts["chain"]:
            return facts["chain"]
    ckpt = ctx.ckpt
    out = []
    for d in (posixpath.dirname(ckpt.root) if ckpt.root else None, ckpt.root, ckpt.tag_dir):  # no root: no tag found
        entry = ckpt.files.entries.get(d) if d else None
        if entry is not None and entry.mode:
            out.append({"path": d, "mode": entry.mode, "owner": entry.owner, "group": entry.group})
    return out


def _framework_files(ckpt, files: list[str]) -> list[str]:
    """The files a framework saved beside the shards (scheduler.bin, rng_state.pth: the names
    probe/framework_files.py knows) that the listings show under the root: a resume opens them too."""
    from triage.probe.framework_files import SAFETENSORS, TORCH_SAVED

    under = (ckpt.root or "").rstrip("/") + "/"
    return sorted(p for p, e in ckpt.files.entries.items() if ckpt.root and p.startswith(under) and p not in files
                  and e.type in ("-", "?") and (TORCH_SAVED.match(e.name) or SAFETENSORS.match(e.name)))


def _may(mode: str, owner: str | None, group: str | None, who: dict | None, bit: str) -> bool | None:
    """May `who` (`id`'s facts) do `bit` (r or x)? Without `id`: True only when every class may."""
    index = {"r": 0, "x": 2}[bit]
    classes = [mode[1 + index], mode[4 + index], mode[7 + index]]
    allowed = [c not in "-ST" if bit == "x" else c != "-" for c in classes]
    if who is None or who.get("uid") is None and who.get("user") is None:
        return True if all(allowed) else None
    if who.get("uid") == 0 and not _network(who):
        return True
    if owner in (who.get("user"), str(who.get("uid"))):
        return allowed[0]
    if group in [who.get("group")] + who.get("group_names", []):
        return allowed[1]
    return allowed[2]


def _network(who: dict) -> bool:
    return bool(who.get("network"))


def _who(who: dict | None) -> str:
    if who is None:
        return "any user"
    return f"{who.get('user')} (uid {who.get('uid')})" if who.get("uid") is not None else str(who.get("user"))


def _squash(ctx, who, path: str) -> str:
    for facts in _facts(ctx, "mounts"):
        for m in facts["mounts"]:
            if m["network"] and path.startswith(m["target"].rstrip("/") + "/") and who and who.get("uid") == 0:
                return (f"; {path} is on {m['fstype']} ({m['source']} at {m['target']}): root is mapped to nobody "
                        "there (root_squash)")
    return ""


def integrity(ctx) -> ProbeResult:
    listing = ctx.listing
    signals, evidence, context = [], [], []
    for facts in _facts(ctx, "head"):
        if facts["problem"]:
            signals.append(facts["problem"])
            evidence.append(f"{facts['file'] or 'the file shown'}: {facts['problem']}: {facts['detail']} (head -c)")
    entries = ctx.ckpt.files.entries if listing and not listing.error else {}
    sizes: dict[str, list[tuple[str, int]]] = {}
    for s in (listing.shards if entries else []):
        entry = entries.get(posixpath.join(listing.path, s.name))
        if entry is not None and entry.size is not None:
            sizes.setdefault(s.kind, []).append((s.name, entry.size))
    for kind, rows in sizes.items():
        for name, size in rows:
            if size == 0:
                signals.append("empty")
                evidence.append(f"{name}: empty: 0 bytes (its size in the listing)")
        # ZeRO pads every rank's partition to one size: the same kind of shard is about the same size on
        # every rank, and a file cut short is smaller than its largest sibling (it cannot grow)
        largest = max((size for _, size in rows), default=0)
        if len(rows) >= 2 and all(exact for exact in _exact(ctx, listing, rows)):
            for name, size in rows:
                if 0 < size < largest / 2:
                    signals.append("truncated")
                    evidence.append(f"{name}: {size} bytes where its largest sibling is {largest}: cut short (sizes "
                                    "from the listing; no byte was read)")
    context.append("no shard was read: only the sizes shown (probe on the host checks each archive)")
    return outcome("integrity", signals=signals, checked=[], complete=False,
                   found="a shard or a framework file is damaged or unsafe", clear="",
                   unknown="the shards' contents were not pasted", evidence=evidence, context=context,
                   command=f"python3 -m zipfile -t {ctx.q(ctx.ckpt.tag or '')}/*.pt")


def _exact(ctx, listing, rows) -> list[bool]:
    return [ctx.ckpt.files.entries[posixpath.join(listing.path, name)].exact for name, _ in rows]


def memory(ctx) -> ProbeResult:
    kills = [k for facts in _facts(ctx, "oom") for k in facts["oom_kills"]]
    if not kills:
        return outcome("memory", signals=[], checked=[], complete=False, found="", clear="",
                       unknown="not in the pasted evidence", evidence=[], command="")
    return outcome("memory", signals=["too_small"], checked=["too_small"], complete=True,
                   found="the host ran out of memory", clear="", unknown="",
                   evidence=[f"the kernel's OOM killer killed {k['process']} (pid {k['pid']}): {k['line']}" for k in kills],
                   command="dmesg | grep -i -e oom -e 'killed process'")
