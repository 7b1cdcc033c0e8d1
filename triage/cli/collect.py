"""`ds-triage collect DIR`: the outputs the chat and `triage --evidence` understand, as one text block
to paste: `id`, `cat latest`, `namei -l` of the tag, and `ls -la` of the root and of each tag dir, written by ds-triage itself
from lstat (read-only: no pickle opened, no symlink followed, nothing outside DIR listed; `latest` is
read through confine.open_regular). --redact masks user and group names and the path above DIR.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
import sys
import time

from triage.errors import EXIT_FOUND, BadInput
from triage.probe import confine


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "collect", help="print a checkpoint's listings to paste into the chat or a ticket (read-only)",
        description="Print `id`, `cat latest` and `ls -la` of the checkpoint root and its tag dirs, in the form "
        "`ds-triage chat` and `ds-triage triage --evidence` read. Reads no file but `latest`, opens no pickle, "
        "follows no symlink.")
    parser.add_argument("dir", metavar="DIR", help="the checkpoint root (the dir the job loads)")
    parser.add_argument("--redact", action="store_true", help="mask user and group names and the path above DIR")
    parser.set_defaults(run=run)


def run(args) -> int:
    sys.stdout.write(collect(args.dir, args.redact))
    return EXIT_FOUND


def collect(directory: str, redact: bool = False) -> str:
    from triage.probe.checkpoint import read_latest

    root = os.path.abspath(directory)
    if not os.path.isdir(root) or os.path.islink(root):
        raise BadInput(f"{directory}: not a directory")
    names = _Names(redact)
    shown = ("…/" + os.path.basename(root)) if redact else root
    uid, gid = os.getuid(), os.getgid()
    groups = ",".join(f"{g}({names.group(g)})" for g in os.getgroups() or [gid])
    out = [f"$ id", f"uid={uid}({names.user(uid)}) gid={gid}({names.group(gid)}) groups={groups}"]
    latest = read_latest(root)
    if latest.text is not None:
        out += [f"$ cat {shown}/latest", latest.text]
    tags = [n for n in _names(root) if _is_dir(os.path.join(root, n))]
    deepest = os.path.join(root, latest.text) if latest.text in tags else (os.path.join(root, tags[-1]) if tags else root)
    out += [f"$ namei -l {shown}{deepest[len(root):]}", _namei(deepest, root, names)]
    out.append(f"$ ls -la {shown} " + " ".join(f"{shown}/{t}" for t in tags))
    for path, label in [(root, shown)] + [(os.path.join(root, t), f"{shown}/{t}") for t in tags]:
        out += [f"{label}:", _listing(path, names), ""]
    return "\n".join(out).rstrip("\n") + "\n"


def _names(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _is_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)  # a symlinked dir is not followed
    except OSError:
        return False


def _namei(path: str, root: str, names: "_Names") -> str:
    """`namei -l PATH`: the mode and owner of each dir from / down (lstat; no link followed)."""
    rows, parts = [f"f: {path if not names.redact else '…/' + os.path.relpath(path, os.path.dirname(root))}"], []
    current = path
    while True:
        parts.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for d in reversed(parts):
        st = os.lstat(d)
        inside = d == root or d.startswith(root + os.sep)
        name = "/" if d == "/" else (os.path.basename(d) if inside or not names.redact else "…")
        rows.append(f"{stat.filemode(st.st_mode)} {names.user(st.st_uid)} {names.group(st.st_gid)} {name}")
    return "\n".join(rows)


def _listing(path: str, names: "_Names") -> str:
    rows = []
    for name in [".", ".."] + _names(path):
        full = os.path.join(path, name)
        try:
            st = os.lstat(full)
        except OSError as exc:
            rows.append(f"ls: cannot access '{name}': {exc.strerror}")
            continue
        when = time.strftime("%b %e %H:%M", time.localtime(st.st_mtime))
        shown = _safe(name)
        if stat.S_ISLNK(st.st_mode):
            shown += " -> " + (_safe(os.readlink(full)) if not names.redact else "…")
        rows.append(f"{stat.filemode(st.st_mode)} {st.st_nlink:2d} {names.user(st.st_uid)} {names.group(st.st_gid)} "
                    f"{st.st_size:8d} {when} {shown}")
    return f"total 0\n" + "\n".join(rows)


def _safe(name: str) -> str:
    """A name with a newline or a control character could print a row of its own (a forged shard):
    shown escaped and quoted instead, as no listing row."""
    return confine.shown(name) if any(c < " " or c == "\x7f" for c in name) else name


class _Names:
    """User and group names, or stand-ins (user1, group1) with --redact."""

    def __init__(self, redact: bool):
        self.redact, self._seen = redact, {}

    def user(self, uid: int) -> str:
        return self._mask("user", uid, lambda: pwd.getpwuid(uid).pw_name)

    def group(self, gid: int) -> str:
        return self._mask("group", gid, lambda: grp.getgrgid(gid).gr_name)

    def _mask(self, kind: str, number: int, real) -> str:
        if self.redact:
            key = (kind, number)
            self._seen.setdefault(key, f"{kind}{sum(k[0] == kind for k in self._seen) + 1}")
            return self._seen[key]
        try:
            return real()
        except KeyError:
            return str(number)
