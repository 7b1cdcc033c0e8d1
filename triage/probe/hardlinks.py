"""Hard links out of the checkpoint root: read a file with several names only when all are inside.

A name inside the root can be another name of a file outside it (`ln /etc/shadow tag/x_optim_states.pt`,
where fs.protected_hardlinks is off, or made by root): no path check sees it, and a hard link cannot
be resolved to its other names. So a file with st_nlink > 1 has its names counted under the root
the reader confines it to (a shard's tag dir, the checkpoint root for `latest`; for a reader given
none, the file's own directory and those below it), by a walk that reads directory entries and
lstat's them, never following a symlink, at most MAX_WALK entries. Only when every one of its
st_nlink names was found there is it read; otherwise it is refused unread ("a hard link, possibly
to a file outside the root"), whatever its owner: an owner test would not be sound (root can link
any file, and fs.protected_hardlinks may be off), the count is.

Healthy checkpoints are not refused: DeepSpeed, torch.save, cp, rsync and tar write files with one
name (tar and `cp -a`/`rsync -H` keep links only among the files they copy). Checkpoints deduplicated against files elsewhere are: `cp -al` and `rsync --link-dest`
snapshots, and dedup tools (`hardlink`, `rdfind -makehardlinks`, `jdupes -L`). A copy breaks the
outside links (`cp -a CKPT COPY` keeps the ones inside it); DS_TRIAGE_TRUST_HARDLINKS=1 reads such
files as they are, for links you made yourself.

One walk serves every file of a root: it records each multi-linked inode's names found, link count
and ctime, and is reused while a file's link count and ctime are those it saw (link() and unlink()
change both), so a tag of N linked files costs one walk, not N.
"""

from __future__ import annotations

import os
import stat

MAX_WALK = 200_000  # directory entries walked to find a hard link's other names
TRUST_HARDLINKS = "DS_TRIAGE_TRUST_HARDLINKS"
_KEPT_WALKS = 8  # roots whose walk is kept (chat and serve probe many checkpoints in one process)

Inode = tuple[int, int]  # (st_dev, st_ino)
_walks: dict[str, dict[Inode, tuple[int, int, int]]] = {}  # root -> inode -> (names found, nlink, ctime_ns)


def hard_link(st: os.stat_result, scope: str) -> str | None:
    """Why the file of `st` is not read, or None: it has one name, or all of its names are under `scope`
    (its content is then the checkpoint's own)."""
    if st.st_nlink <= 1 or os.environ.get(TRUST_HARDLINKS) == "1":
        return None
    top, inode, now = os.path.realpath(scope), (st.st_dev, st.st_ino), (st.st_nlink, st.st_ctime_ns)
    seen = _walks.get(top, {}).get(inode)
    if seen is None or seen[1:] != now:  # new since the walk, or linked / unlinked since: walk again
        seen = _walk(top).get(inode, (0, *now))
    found = seen[0]
    if found >= st.st_nlink and seen[1:] == now:
        return None
    return (f"a hard link ({st.st_nlink} names, {found} of them inside the checkpoint), possibly to a file outside "
            "the root: not read (`cp -al`/`rsync --link-dest` snapshots and dedup tools make such links: probe a "
            f"copy made with `cp -a`, or set {TRUST_HARDLINKS}=1 for links you made)")


def _walk(top: str) -> dict[Inode, tuple[int, int, int]]:
    """Every regular file under `top` with several names: (names found here, nlink, ctime_ns)."""
    found: dict[Inode, tuple[int, int, int]] = {}
    seen, stack = 0, [top]
    while stack and seen < MAX_WALK:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    seen += 1
                    if seen > MAX_WALK:
                        break  # the names not reached are not counted: their files are refused
                    _count(entry, stack, found)
        except OSError:
            continue  # unlistable: its names are not counted, so their files are refused
    if len(_walks) >= _KEPT_WALKS:
        _walks.clear()
    _walks[top] = found
    return found


def _count(entry: os.DirEntry, stack: list[str], found: dict) -> None:
    try:
        if entry.is_dir(follow_symlinks=False):
            stack.append(entry.path)
            return
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        names = found.get((st.st_dev, st.st_ino), (0,))[0]
        found[(st.st_dev, st.st_ino)] = (names + 1, st.st_nlink, st.st_ctime_ns)
