"""Run a read-only check as another user: the job's, when the person triaging is root.

Root ignores permission bits, so a root shell sees every shard a job running as `alice` was
refused. `--as-user alice` makes the permission probe ask the kernel as alice: a forked child
drops to alice's uid, gid and supplementary groups and does the same access checks, so ACLs,
group membership and NFS identity mapping count exactly as they do for the job. The child only
makes system calls and reports back through a pipe; nothing is written anywhere.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
from dataclasses import dataclass
from typing import Callable

from triage.errors import UsageError


@dataclass(frozen=True)
class Identity:
    uid: int
    gid: int
    groups: tuple[int, ...]
    name: str

    def describe(self) -> str:
        groups = ",".join(map(str, self.groups)) or "none"
        return f"{self.name} (uid {self.uid}, gid {self.gid}, groups {groups})"

    @property
    def is_current(self) -> bool:
        return (self.uid, self.gid) == (os.geteuid(), os.getegid()) and set(self.groups) == set(os.getgroups())


def current() -> Identity:
    uid = os.geteuid()
    return Identity(uid, os.getegid(), tuple(os.getgroups()), _user_name(uid))


def resolve(spec: str) -> Identity:
    """NAME, UID or UID:GID. A known user gets their primary and supplementary groups; a bare
    number with no passwd entry (a container's uid) gets GID or the same number as its group."""
    text = spec.strip()
    user_part, _, group_part = text.partition(":")
    entry = _passwd(user_part)
    if entry is None and not user_part.isdigit():
        raise UsageError(f"--as-user {spec}: no such user (give a name, a uid, or uid:gid)")
    uid = entry.pw_uid if entry else int(user_part)
    gid = _group_id(group_part, spec) if group_part else (entry.pw_gid if entry else uid)
    groups = tuple(os.getgrouplist(entry.pw_name, gid)) if entry else (gid,)
    return Identity(uid, gid, groups, entry.pw_name if entry else str(uid))


def run_as(who: Identity, check: Callable[..., dict], *args) -> dict:
    """check(*args) in a child running as `who`; its JSON-able result, or {"error": ...}.

    check must only make system calls: it runs in a forked child, where taking a lock another
    thread held at fork time would hang (so user and group names are looked up before)."""
    if who.is_current:
        return check(*args)
    if os.geteuid() != 0:
        raise UsageError(f"--as-user {who.name}: only root can check as another user; run the check as "
                         f"{who.name} instead (sudo -u {who.name} ds-triage ...)")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop privileges for good, check, report, exit without cleanup
        os.close(read_end)
        try:
            os.setgroups(list(who.groups))
            os.setgid(who.gid)
            os.setuid(who.uid)
            result = check(*args)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, never raised here
            result = {"error": f"{type(exc).__name__}: {exc}"}
        try:
            os.write(write_end, json.dumps(result).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 65536):
        chunks.append(chunk)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    if not chunks:
        return {"error": f"the check as {who.name} ended without a result (wait status {status})"}
    return json.loads(b"".join(chunks))


def _passwd(name_or_uid: str):
    try:
        return pwd.getpwuid(int(name_or_uid)) if name_or_uid.isdigit() else pwd.getpwnam(name_or_uid)
    except KeyError:
        return None


def _group_id(text: str, spec: str) -> int:
    if text.isdigit():
        return int(text)
    try:
        return grp.getgrnam(text).gr_gid
    except KeyError:
        raise UsageError(f"--as-user {spec}: no such group {text!r}") from None


def _user_name(uid: int) -> str:
    entry = _passwd(str(uid))
    return entry.pw_name if entry else str(uid)
