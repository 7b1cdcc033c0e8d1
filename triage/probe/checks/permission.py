"""permission: can the loading user reach and read everything the load opens?

Checks the execute bit of every directory from / down to the tag dir, that the root and the tag
dir can be listed, and a real read (open + 4 bytes, O_NOATIME where allowed) of `latest`, every
shard and every file a framework saved beside them. Reads go through confine.open_regular: a file
that leads outside the checkpoint, is no regular file or is a hard link out is neither opened nor
read (the path probe names it). Each failure names the mode, the owner and who was checked. When
root is refused, an NFS mount with root_squash is the usual reason (/proc/mounts says whether the
path is on NFS).
The checks run as you, or with --as-user as the job's user (triage/probe/as_user.py): root
itself ignores permission bits.

Confirmed: a directory cannot be traversed (untraversable) or listed (unlistable), or a file
cannot be read (unreadable).
"""

from __future__ import annotations

import errno
import grp
import os
import pwd
import shlex
import stat

from triage.probe import as_user, confine
from triage.probe.context import ProbeContext
from triage.probe.result import ProbeResult, outcome

NAME = "permission"
SIGNALS = ("untraversable", "unlistable", "unreadable")
NFS_TYPES = ("nfs", "nfs4", "cifs", "smb3", "fuse.sshfs", "lustre", "gpfs", "beegfs")


def probe(ctx: ProbeContext) -> ProbeResult:
    ckpt = ctx.ckpt
    if ckpt.root is None:
        return outcome(NAME, signals=[], checked=[], complete=False, found="", clear="",
                       unknown="no checkpoint to check permissions on", evidence=[], command="")
    who = ctx.as_user or as_user.current()
    listing = ctx.listing
    tag_dir = ckpt.tag_dir if ckpt.tag_dir and os.path.isdir(ckpt.tag_dir) and not _led_out(listing) else None
    chain = _ancestors(tag_dir or ckpt.root)
    dirs = [ckpt.root] + ([tag_dir] if tag_dir else [])
    reads = []  # (file, the root it may not lead out of)
    if ckpt.latest and ckpt.latest.exists:
        reads.append((ckpt.latest.path, ckpt.root))
    if listing and listing.exists and not listing.error:
        reads += [(os.path.join(listing.path, s.name), listing.path) for s in listing.shards]
    reads += _framework_files(ckpt, [path for path, _ in reads])
    files = [path for path, _ in reads]
    access = as_user.run_as(who, _access_check, chain, dirs, reads)
    if "error" in access:
        return outcome(NAME, signals=[], checked=[], complete=False, found="", clear="",
                       unknown=f"could not check as {who.describe()}: {access['error']}", evidence=[],
                       command=f"namei -l {_q(tag_dir or ckpt.root)}")
    signals = [signal for signal, _, _ in access["denied"]]
    denied_paths = [path for _, path, _ in access["denied"]]
    evidence = [f"{path}: {why}; {_mode_owner(path, who)}; {'you are' if ctx.as_user is None else 'checked as'} "
                f"{who.describe()}" for _, path, why in access["denied"]] + access["notes"]
    checked = list(SIGNALS)
    context: list[str] = []
    if signals and who.uid == 0:
        hint = _nfs_hint(ckpt.root)
        evidence.append(hint or "you are root and were still refused: the file system enforces it "
                        "(NFS root_squash, a FUSE mount, or an LSM such as SELinux/AppArmor)")
    if not signals:
        context.append(f"{len(files) - access['refused']} file(s) read and {len(chain)} directories traversed as "
                       f"{who.describe()}" + (f"; {access['refused']} not read: they lead outside the checkpoint, are "
                                              "not regular files or are hard links (the path probe names them)"
                                              if access["refused"] else ""))
        if who.uid == 0:
            closed = _closed_to_others(chain, dirs, files)
            if closed:
                context.append(f"note: you are root, so permission bits do not stop you; {len(closed)} path(s) "
                               f"are closed to other users (e.g. {closed[0]}): a job running as another user may "
                               "be refused; --as-user USER checks as that user")
    target = denied_paths[0] if denied_paths else (files[-1] if files else ckpt.root)
    found = "something the load opens is not readable by " + ("you" if ctx.as_user is None else who.name)
    return outcome(NAME, signals=signals, checked=checked, complete=True, found=found,
                   clear="every directory, shard and framework file is reachable and readable", unknown="", evidence=evidence,
                   context=context, command=f"namei -l {_q(target)}; id" + (f" {who.name}" if ctx.as_user else ""),
                   facts={"unreadable": access["unreadable"], "checked_as": who.describe()})


def _led_out(listing) -> bool:
    """The tag dir is a way out of the checkpoint root (the listing refused it): not listed here either."""
    return bool(listing and listing.error and "outside the checkpoint root" in listing.error)


def _framework_files(ckpt, files: list[str]) -> list[tuple[str, str]]:
    """The files a framework saved beside the shards (accelerate's scheduler.bin, the Trainer's
    rng_state.pth: probe/framework_files.py), each with the dir they were found under: a resume opens
    them too, and one the job may not read fails it with the same PermissionError."""
    from triage.probe import framework_files

    base = framework_files.base(ckpt.given)
    return [(path, base) for path in framework_files.find(base) if path not in files]


def _access_check(chain: list[str], dirs: list[str], reads: list[tuple[str, str]]) -> dict:
    """The access checks, as whoever runs them (as_user.run_as may run this in a child that
    dropped to the job's user): system calls only, JSON-able result. reads: (file, its root)."""
    denied: list[list[str]] = []
    notes: list[str] = []
    # 1. every directory from / down to the tag dir must be traversable (x)
    for d in chain:
        if not os.access(d, os.X_OK):
            denied.append(["untraversable", d, "no execute (search) permission: nothing below it can be opened"])
            break
    # 2. the root and the tag dir must be listable (r + x)
    for d in dirs:
        if any(d == path for _, path, _ in denied):
            continue
        try:
            os.listdir(d)
        except PermissionError:
            denied.append(["unlistable", d, "cannot list it (needs read and execute): DeepSpeed's glob for the "
                           "shards sees no file and reports them as missing"])
        except OSError as exc:
            notes.append(f"{d}: cannot list it: {exc.strerror or exc}")
    # 3. a real read of latest and of every shard the tag dir shows; below a directory already
    # refused, the file's own mode is beside the point: count it, name the directory once
    closed = [path + os.sep for signal, path, _ in denied if signal == "untraversable"]
    unreadable, behind, refused = 0, 0, 0
    for path, root in reads:
        try:
            problem = _read_test(path, root)
        except confine.Refused:  # not read, so not judged here: the path probe reports it (unsafe_path)
            refused += 1
            continue
        if problem:
            unreadable += 1
            if any(path.startswith(d) for d in closed):
                behind += 1
            else:
                denied.append(["unreadable", path, problem])
    if behind:
        notes.append(f"{behind} file(s) below {closed[0].rstrip(os.sep)} cannot be opened because of it")
    return {"denied": denied, "notes": notes, "unreadable": unreadable, "refused": refused}


def _closed_to_others(chain: list[str], dirs: list[str], files: list[str]) -> list[str]:
    """Paths whose 'other' bits would stop a user who is neither owner nor in the group."""
    needs = [(d, stat.S_IXOTH) for d in chain] + [(d, stat.S_IROTH) for d in dirs] + [(f, stat.S_IROTH) for f in files]
    closed = []
    for path, bit in needs:
        try:
            if not os.stat(path).st_mode & bit and path not in closed:
                closed.append(path)
        except OSError:
            continue
    return closed


def _q(path: str) -> str:
    return shlex.quote(path)


def _ancestors(path: str) -> list[str]:
    path = os.path.abspath(path)
    chain = [path]
    while True:
        parent = os.path.dirname(chain[-1])
        if parent == chain[-1]:
            break
        chain.append(parent)
    return list(reversed(chain))


def _read_test(path: str, root: str) -> str | None:
    try:
        with confine.open_regular(path, root, noatime=True) as f:  # never a FIFO, never out of the root
            f.read(4)
    except confine.Refused:
        raise  # not a permission problem: the caller counts it apart
    except PermissionError:
        return "cannot open it for reading (permission denied)"
    except OSError as exc:
        if exc.errno in (errno.ENOENT,):
            return None  # gone since the listing: the completeness probe reports missing files
        return f"read failed: {exc.strerror or exc}"
    return None


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def _mode_owner(path: str, who: as_user.Identity) -> str:
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"cannot stat it ({exc.strerror})"
    if who.uid == st.st_uid:
        applies = "the owner bits apply"
    elif st.st_gid == who.gid or st.st_gid in who.groups:
        applies = "the group bits apply"
    else:
        applies = "the 'other' bits apply"
    return (f"mode {stat.filemode(st.st_mode)} ({oct(stat.S_IMODE(st.st_mode))}), owner "
            f"{_user(st.st_uid)}:{_group(st.st_gid)}, {applies}")


def _nfs_hint(path: str) -> str | None:
    try:
        with open("/proc/mounts", encoding="utf-8", errors="replace") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return None
    path = os.path.realpath(path)
    best = None
    for fields in mounts:
        if len(fields) >= 3:
            point = fields[1].replace("\\040", " ")
            if (path == point or path.startswith(point.rstrip("/") + "/")) and (best is None or len(point) > len(best[1])):
                best = fields
    if best and best[2] in NFS_TYPES:
        return (f"{path} is on {best[2]} ({best[0]} at {best[1]}): root is mapped to nobody there "
                "(root_squash), so root cannot read what 'other' may not; read it as the owner, or ask for "
                "no_root_squash / a+r")
    return None
