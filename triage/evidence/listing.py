"""Directory listings as pasted: `ls -l` (-a, -h, -R, several dirs), `find -type f [-printf '%s %p\\n']`,
`tree` (-s, -h, -p, -u), `du -a` and `stat`. Each becomes Entry rows (path, type, mode, owner, size);
nothing on disk is read. A line no parser claims is left over for the other kinds.

Every pattern is anchored and has no nested repetition: a pasted line is matched in linear time.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

# -rw-r--r--  1 root root 5749 Dec  7 21:16 name   (or a long-iso date; a device's "major, minor")
LS = re.compile(r"^(?P<type>[-dlcbps])(?P<perm>[-rwxsStT]{9})[.+@]?\s+\d+\s+(?P<owner>\S+)\s+(?P<group>\S+)\s+"
                r"(?P<size>\d+,\s*\d+|[\d.,]+[KMGTPE]?)\s+"
                r"(?P<date>[A-Z][a-z]{2}\s+\d{1,2}\s+(?:\d{1,2}:\d\d|\d{4})|\d{4}-\d\d-\d\d(?:[ T][\d:.]+(?: [+-]\d{4})?)?)"
                r"\s(?P<name>.+)$")
# what ls prints on stderr beside the listing: a dir it may not open, a path that is not there (named
# as it was run: `/usr/bin/ls: ...` from the chat's /run, which runs programs by their path)
LS_ERROR = re.compile(r"^(?:/[\w.+-]+)*/?ls: cannot (?:open directory|access) '?(?P<path>[^'\n]+?)'?: "
                      r"(?P<why>Permission denied|No such file or directory)$")
LS_TOTAL = re.compile(r"^total \d+(?:[.,]\d+)?[KMGTPE]?$")
LS_HEADER = re.compile(r"^(?P<dir>[^\s:][^:]*):$")
FIND_SIZED = re.compile(r"^(?P<size>\d+)\s+(?P<path>[./~][^\n]*)$")
FIND_PLAIN = re.compile(r"^(?P<path>(?:/|\./)[^\n]*)$")
DU = re.compile(r"^(?P<size>\d+(?:[.,]\d+)?[KMGTPE]?)\t(?P<path>.+)$")
TREE_ROW = re.compile(r"^(?P<indent>(?:[│|]\s\s\s|\s{4})*)[├└|`][─-]{2}\s(?:\[(?P<attrs>[^\]]*)\]\s+)?(?P<name>.+)$")
TREE_ROOT = re.compile(r"^(?:\[(?P<attrs>[^\]]*)\]\s+)?(?P<name>.+)$")
TREE_SUMMARY = re.compile(r"^\d+ director(?:y|ies)(?:, \d+ files?)?$")
STAT_FILE = re.compile(r"^\s*File: (?P<path>.+)$")
STAT_SIZE = re.compile(r"^\s*Size: (?P<size>\d+)\s+Blocks: \d+\s+IO Block: \d+\s+(?P<kind>.+)$")
STAT_ACCESS = re.compile(r"^Access: \((?P<octal>\d{4})/(?P<mode>[-dlcbps][-rwxsStT]{9})\)\s+Uid: \(\s*(?P<uid>\d+)/\s*"
                         r"(?P<owner>[^)\s][^)]*)\)\s+Gid: \(\s*(?P<gid>\d+)/\s*(?P<group>[^)\s][^)]*)\)$")
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50, "E": 1 << 60}
MODE = re.compile(r"[-dlcbps][-rwxsStT]{9}")
SIZE = re.compile(r"[\d.,]+[KMGTPE]?")
STAT_OTHER = re.compile(r"^\s*(?:Device|Access|Modify|Change|Birth): ")


@dataclass
class Entry:
    path: str  # as the output names it: absolute, relative to the dir listed, or "./..."
    type: str = "-"  # ls's first letter: - d l c b p s
    mode: str | None = None  # "-rw-r--r--"
    owner: str | None = None
    group: str | None = None
    size: int | None = None  # bytes; about, when `exact` is False (-h, du)
    exact: bool = True
    link: str | None = None  # a symlink's target
    error: str | None = None  # ls could not open or find it: "Permission denied", "No such file or directory"
    shows_parent: bool = True  # its row is one of its dir's listing (not `.`/`..`, not a lone `stat FILE`)
    shows_self: bool = False  # `.` of `ls -la`: the dir's own listing follows

    @property
    def name(self) -> str:
        return posixpath.basename(self.path.rstrip("/")) or self.path


def size_of(text: str) -> tuple[int | None, bool]:
    """`5749` -> (5749, True); `5.7K` -> (5836, False)."""
    text = text.replace(",", ".")
    unit = text[-1] if text[-1:] in UNITS and text[-1:] else ""
    try:
        value = float(text[:-1] if unit else text)
    except ValueError:
        return None, False
    return int(value * UNITS[unit]), not unit and "." not in text


def ls(lines: list[str], base: str) -> tuple[list[Entry], list[int]]:
    """`ls -l` rows, under `base` (the dir the command named, "." when unknown) or the `DIR:` headers of
    -R and of several dirs. Returns the entries and the indices of the lines claimed."""
    entries, claimed, here = [], [], base
    for i, line in enumerate(lines):
        m = LS.match(line)
        if m:
            name, link = m["name"], None
            if m["type"] == "l" and " -> " in name:
                name, link = name.split(" -> ", 1)
            if name in (".", ".."):
                path = name if here == "." else here if name == "." else posixpath.dirname(here.rstrip("/")) or "/"
                entries.append(_ls_entry(m, path, None, dot=name))
            else:
                entries.append(_ls_entry(m, posixpath.join(here, name), link))
            claimed.append(i)
        elif LS_TOTAL.match(line):
            claimed.append(i)
        elif LS_ERROR.match(line):
            e = LS_ERROR.match(line)
            entries.append(Entry(path=e["path"].rstrip("/"), type="?", error=e["why"], shows_parent=False))
            claimed.append(i)
        elif LS_HEADER.match(line) and _next_is_listing(lines, i):
            here = LS_HEADER.match(line)["dir"]
            claimed.append(i)
    return entries, claimed


def _ls_entry(m, path: str, link: str | None, dot: str = "") -> Entry:
    size, exact = (None, True) if "," in m["size"] and m["type"] in "cb" else size_of(m["size"])
    return Entry(path=path, type=m["type"], mode=m["type"] + m["perm"], owner=m["owner"], group=m["group"],
                 size=None if dot else size, exact=exact, link=link, shows_parent=not dot, shows_self=dot == ".")


def _next_is_listing(lines: list[str], i: int) -> bool:
    nxt = next((line for line in lines[i + 1:i + 3] if line.strip()), "")
    return bool(LS_TOTAL.match(nxt) or LS.match(nxt))


def find(lines: list[str]) -> tuple[list[Entry], list[int]]:
    """`find DIR -type f -printf '%s %p\\n'` (sizes) or plain `find` (paths only)."""
    entries, claimed = [], []
    for i, line in enumerate(lines):
        m = FIND_SIZED.match(line)
        if m:
            entries.append(Entry(path=m["path"], size=int(m["size"])))
            claimed.append(i)
            continue
        m = FIND_PLAIN.match(line)
        if m and " " not in line.strip() and "\t" not in line:
            entries.append(Entry(path=m["path"], size=None))
            claimed.append(i)
    return entries, claimed


def du(lines: list[str]) -> tuple[list[Entry], list[int]]:
    """`du -a` (KiB blocks) or `du -ah`: sizes are disk usage, about the file's size."""
    entries, claimed = [], []
    for i, line in enumerate(lines):
        m = DU.match(line)
        if m:
            size, _ = size_of(m["size"])
            unit = 1 if m["size"][-1:] in UNITS and m["size"][-1:] else 1024  # plain du counts KiB
            entries.append(Entry(path=m["path"], type="?", size=size * unit if size is not None else None, exact=False))
            claimed.append(i)
    return entries, claimed


def tree(lines: list[str]) -> tuple[list[Entry], list[int]]:
    """`tree DIR` (with -s/-h sizes, -p modes, -u/-g owners in brackets): its first line is the dir."""
    entries, claimed, stack, root = [], [], [], None
    for i, line in enumerate(lines):
        m = TREE_ROW.match(line)
        if m and root is not None:
            depth = len(m["indent"]) // 4
            stack[depth:] = [m["name"].split(" -> ", 1)[0]]
            entry = Entry(path=posixpath.join(root, *stack), type="?")
            if " -> " in m["name"]:
                entry.type, entry.link = "l", m["name"].split(" -> ", 1)[1]
            _tree_attrs(entry, m["attrs"] or "")
            entries.append(entry)
            claimed.append(i)
        elif TREE_SUMMARY.match(line.strip()):
            claimed.append(i)
        elif root is None and line.strip() and i + 1 < len(lines) and TREE_ROW.match(lines[i + 1]):
            m = TREE_ROOT.match(line.strip())
            root = m["name"]
            entries.append(Entry(path=root, type="d"))
            _tree_attrs(entries[-1], m["attrs"] or "")
            claimed.append(i)
    # a row with rows below it is a directory
    paths = [e.path for e in entries]
    for index, entry in enumerate(entries):
        if entry.type == "?" and index + 1 < len(paths) and paths[index + 1].startswith(entry.path + "/"):
            entry.type = "d"
    return entries, claimed


def _tree_attrs(entry: Entry, attrs: str) -> None:
    for word in attrs.split():
        if MODE.fullmatch(word):
            entry.mode, entry.type = word, word[0]
        elif SIZE.fullmatch(word):
            entry.size, entry.exact = size_of(word)
        elif entry.owner is None:
            entry.owner = word
        else:
            entry.group = word


def stat(lines: list[str], globbed: bool = False) -> tuple[list[Entry], list[int]]:
    """GNU `stat FILE...`: path, size, kind, mode and owners of each; they stand for their dir's whole
    listing only when the command globbed it (`stat DIR/*`)."""
    entries, claimed = [], []
    for i, line in enumerate(lines):
        m = STAT_FILE.match(line)
        if m:
            path = m["path"]
            link = None
            if path.startswith(("'", "‘")) and " -> " in path:  # a symlink: 'a' -> 'b'
                path, link = (p.strip("'‘’") for p in path.split(" -> ", 1))
            entries.append(Entry(path=path, link=link, shows_parent=globbed))
            claimed.append(i)
            continue
        if not entries:
            continue
        m = STAT_SIZE.match(line)
        if m:
            entries[-1].size = int(m["size"])
            claimed.append(i)
            continue
        m = STAT_ACCESS.match(line.strip())
        if m:
            e = entries[-1]
            e.mode, e.type, e.owner, e.group = m["mode"], m["mode"][0], m["owner"], m["group"]
            claimed.append(i)
        elif STAT_OTHER.match(line):
            claimed.append(i)
    return entries, claimed

