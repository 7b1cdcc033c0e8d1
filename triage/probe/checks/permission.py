"""permission: can the current user reach and read everything the load opens?

Checks the execute bit of every directory from / down to the tag dir, that the root and the tag
dir can be listed, and a real read (open + 4 bytes, O_NOATIME where allowed) of `latest` and
every shard. Each failure names the mode, the owner and who you are. When root is refused, an
NFS mount with root_squash is the usual reason (/proc/mounts says whether the path is on NFS).

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
    me = _who()
    evidence: list[str] = []
    signals: list[str] = []
    denied_paths: list[str] = []

    def deny(signal: str, path: str, why: str) -> None:
        signals.append(signal)
        denied_paths.append(path)
        evidence.append(f"{path}: {why}; {_mode_owner(path)}; you are {me}")

    # 1. every directory from / down to the tag dir must be traversable (x)
    chain = _ancestors(ckpt.tag_dir if ckpt.tag_dir and os.path.isdir(ckpt.tag_dir) else ckpt.root)
    for d in chain:
        if not os.access(d, os.X_OK):
            deny("untraversable", d, "no execute (search) permission: nothing below it can be opened")
            break
    # 2. the root and the tag dir must be listable (r + x)
    for d in [ckpt.root] + ([ckpt.tag_dir] if ckpt.tag_dir and os.path.isdir(ckpt.tag_dir) else []):
        if d in denied_paths:
            continue
        try:
            os.listdir(d)
        except PermissionError:
            deny("unlistable", d, "cannot list it (needs read and execute): DeepSpeed's glob for the shards "
                 "sees no file and reports them as missing")
        except OSError as exc:
            evidence.append(f"{d}: cannot list it: {exc.strerror or exc}")
    # 3. a real read of latest and of every shard the tag dir shows
    files = []
    if ckpt.latest and ckpt.latest.exists:
        files.append(ckpt.latest.path)
    listing = ctx.listing
    if listing and listing.exists and not listing.error:
        files += [os.path.join(listing.path, s.name) for s in listing.shards]
    unreadable = 0
    for path in files:
        problem = _read_test(path)
        if problem:
            unreadable += 1
            deny("unreadable", path, problem)
    checked = list(SIGNALS)
    context: list[str] = []
    if signals and os.geteuid() == 0:
        hint = _nfs_hint(ckpt.root)
        evidence.append(hint or "you are root and were still refused: the file system enforces it "
                        "(NFS root_squash, a FUSE mount, or an LSM such as SELinux/AppArmor)")
    if not signals:
        context.append(f"{len(files)} file(s) read and {len(chain)} directories traversed as {me}")
        if os.geteuid() == 0:
            closed = [p for p in files if not os.stat(p).st_mode & stat.S_IROTH]
            if closed:
                context.append(f"note: you are root, so permission bits do not stop you; {len(closed)} file(s) "
                                f"are not readable by other users (e.g. {os.path.basename(closed[0])}): "
                                "a job running as another user may be refused")
    target = denied_paths[0] if denied_paths else (files[-1] if files else ckpt.root)
    return outcome(NAME, signals=signals, checked=checked, complete=True,
                   found="something the load opens is not readable by you",
                   clear="every directory and shard is reachable and readable",
                   unknown="", evidence=evidence, context=context, command=f"namei -l {_q(target)}; id",
                   facts={"unreadable": unreadable})


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


def _read_test(path: str) -> str | None:
    flags = os.O_RDONLY | getattr(os, "O_NOATIME", 0)
    try:
        try:
            fd = os.open(path, flags)
        except PermissionError:
            if flags == os.O_RDONLY:
                raise
            fd = os.open(path, os.O_RDONLY)  # O_NOATIME needs ownership; retry plainly
        try:
            os.read(fd, 4)
        finally:
            os.close(fd)
    except PermissionError:
        return "cannot open it for reading (permission denied)"
    except OSError as exc:
        if exc.errno in (errno.ENOENT,):
            return None  # gone since the listing: the completeness probe reports missing files
        return f"read failed: {exc.strerror or exc}"
    return None


def _who() -> str:
    uid, gid = os.geteuid(), os.getegid()
    return f"{_user(uid)} (uid {uid}, gid {gid}, groups {','.join(map(str, os.getgroups())) or 'none'})"


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


def _mode_owner(path: str) -> str:
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"cannot stat it ({exc.strerror})"
    uid, gid = os.geteuid(), os.getegid()
    if uid == st.st_uid:
        applies = "the owner bits apply to you"
    elif st.st_gid == gid or st.st_gid in os.getgroups():
        applies = "the group bits apply to you"
    else:
        applies = "the 'other' bits apply to you"
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
