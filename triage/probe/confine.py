"""Keep every read and write inside the checkpoint root, on regular files only (issue 16).

A checkpoint of unknown origin may plant symlinks (`latest` -> /etc/shadow, a tag dir -> /),
`..` tags, FIFOs (an open() that blocks forever) or devices (/dev/zero, read to the memory
limit). Every reader and writer under triage/probe, manifest and repair goes through here:

* `within(root, path)`: the path with its symlinks resolved, or Refused when it leaves the root.
  A symlink inside the root to elsewhere inside it is allowed (resolved, never followed out).
* `open_regular(path, root)`: opened with O_NOFOLLOW | O_NONBLOCK on its resolved path, then
  fstat'ed: a FIFO, device or socket is refused without ever blocking on it or reading it, and
  so is a hard link whose other names are not all inside the root (probe/hardlinks.py).
* `refusal(root, path)`: why a listed path will not be read (outside, a symlink loop, not a regular
  file, a hard link out), from metadata only: what the listings and the manifest report by name.
* `atomic_write` and `backup`: temporaries are created O_EXCL in a directory this process just
  made (mkdtemp), and renamed over the target; nothing is ever written or copied through a symlink.

Refused is an OSError, so the callers' existing `except OSError` report it as a finding.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile

from triage.probe.hardlinks import hard_link

_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
SHOWN_CHARS = 64  # at most this much of a name the checkpoint chose is printed


class Refused(OSError):
    """A path the tool will not touch: outside the checkpoint root, or not a regular file."""

    def __init__(self, path: str, why: str):
        super().__init__(errno.EPERM, why, path)

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


def shown(text: str) -> str:
    """A name read from the checkpoint, made safe to print: escaped (repr) and cut short."""
    return repr(text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "...")


def is_inside(root: str, path: str) -> bool:
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def within(root: str, path: str) -> str:
    """`path` resolved; Refused if it (or a symlink on the way) leads out of `root`."""
    if not is_inside(root, path):
        raise Refused(path, "leads outside the checkpoint root (a symlink or `..`): not followed")
    return os.path.realpath(path)


def kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def special(path: str) -> str | None:
    """What `path` is if it is not a regular file (following symlinks), e.g. 'a FIFO'; None if regular
    or missing. A stat never blocks, unlike an open of a FIFO."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else kind(mode)


def open_regular(path: str, root: str | None = None, mode: str = "rb", noatime: bool = False):
    """A file object on the regular file at `path` (inside `root` when given), never blocking. A FIFO,
    device or socket, or a hard link with a name outside `root` (without one, outside the file's
    directory) is refused from its stat, before any open, and the file opened must be the one vetted.
    noatime: O_NOATIME where the kernel allows it (the file's owner, or root)."""
    real = within(root, path) if root is not None else os.path.realpath(path)
    scope = root if root is not None else os.path.dirname(real)
    try:
        before = os.stat(real)
        _vet(path, before, scope)
        fd = _open(real, noatime)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # realpath left a link unresolved: a loop (or one swapped in since)
            raise Refused(path, "a symlink loop: not followed") from None
        raise
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
            raise Refused(path, "replaced while it was opened: not read")
        if st.st_nlink > before.st_nlink:
            _vet(path, st, scope)
        return os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"}))
    except BaseException:
        os.close(fd)
        raise


def _vet(path: str, st: os.stat_result, scope: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise Refused(path, f"{kind(st.st_mode)}, not a regular file: not read")
    why = hard_link(st, scope)
    if why:
        raise Refused(path, why)


def _open(real: str, noatime: bool) -> int:
    if noatime and getattr(os, "O_NOATIME", 0):
        try:
            return os.open(real, _READ | os.O_NOATIME)
        except PermissionError:
            pass  # O_NOATIME needs ownership: retry plainly (a real EACCES is raised again below)
    return os.open(real, _READ)


def refusal(root: str, path: str) -> str | None:
    """Why `path` (listed in a dir under `root`) will not be read, from its metadata alone, or None: it
    leads outside `root`, is a symlink loop, is not a regular file (a directory is fine here), or is a
    hard link with a name outside `root`. A stat never blocks, unlike an open of a FIFO."""
    if not is_inside(root, path):
        return "leads outside the checkpoint root (a symlink or `..`): not followed"
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symlink loop: not followed"
        return None  # missing or unreadable: the completeness and permission probes say so
    if stat.S_ISDIR(st.st_mode):
        return None
    try:
        _vet(path, st, root)
    except Refused as exc:
        return exc.strerror
    return None


def fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems cannot fsync a directory; the rename is still atomic
    finally:
        os.close(fd)


def _private_copy(path: str, write) -> None:
    """Create a new file in a fresh private dir beside `path`, fill it with write(fd), rename it to `path`.
    The rename replaces `path` itself, a symlink included, never what it points at."""
    parent = os.path.dirname(os.path.abspath(path))
    staging = tempfile.mkdtemp(prefix=".ds-triage-", dir=parent)
    tmp = os.path.join(staging, "new")
    try:
        fd = os.open(tmp, _CREATE, 0o644)
        try:
            write(fd)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    fsync_dir(parent)


def atomic_write(path: str, text: str) -> None:
    """Replace `path` with `text` atomically (temporary file, fsync, rename)."""
    data = text.encode("utf-8")
    _private_copy(path, lambda fd: _write_all(fd, data))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def backup(path: str, target: str) -> None:
    """Copy `path` to the new file `target`. A symlink is copied as a symlink (its target is never
    read); a FIFO or device is refused."""
    if os.path.islink(path):
        os.symlink(os.readlink(path), target)
        return
    copy_regular(path, target)


def copy_regular(path: str, target: str, root: str | None = None) -> None:
    """Copy the regular file `path` (inside `root` when given) to the new file `target`, fsynced."""
    with open_regular(path, root) as src:
        fd = os.open(target, _CREATE, stat.S_IMODE(os.fstat(src.fileno()).st_mode))
        with os.fdopen(fd, "wb") as dst:
            shutil.copyfileobj(src, dst)
            dst.flush()
            os.fsync(dst.fileno())
