"""Pasted command output, read by its shape: `read(text) -> list[Evidence]`.

The person pasting is seldom on the host that holds the checkpoint; they run what the chat asks
there and paste the output back. Each kind's parser (listing.py, system.py, software.py, content.py)
claims the lines it understands; what no parser claims is log text, as before. A `$ command` line
(a shell prompt) starts a new block and tells the parsers which command printed it, but is never
needed: every kind is recognised by the shape of its output, except `whoami`'s bare name.

The evidence becomes the facts the probes use: listings a virtual checkpoint (virtual.py) that the
same checks run on, the rest the load's settings (target) and the host's (probes.py).
"""

from __future__ import annotations

import re
from triage.record import Record

# A shell prompt before a command the chat asks for: `$ ls -la x`, `user@host:~$ id`, `# namei -l x`.
PROMPT = re.compile(r"^\s*(?:\(\S+\)\s)?(?:[\w.\-]+@[\w.\-]+(?::[^$#\s]*)?\s?)?[$#%]\s+(?P<command>"
                    r"(?:ls|find|tree|du|stat|cat|head|id|whoami|namei|findmnt|mount|pip3?|python3?|ds_report|"
                    r"nvidia-smi|free|dmesg|journalctl|sudo|ds-triage)\b.*)$")

def kinds() -> tuple:
    """kind -> (what it is, in words; parser). Order matters: the more specific shapes first. Built on
    first use: the parsers are imported only when a paste is read (classify imports this package for
    its deciding question alone)."""
    from triage.evidence import content, listing, saved, software, system

    return (
        ("stat", "stat", listing.stat), ("tree", "tree", listing.tree), ("namei", "namei -l", system.namei),
        ("ls", "ls -l", None), ("find", "find", listing.find), ("du", "du", listing.du),
        ("identity", "id", system.identity), ("mounts", "findmnt/mount", system.mounts),
        ("memory", "free", system.memory), ("gpus", "nvidia-smi", system.gpus),
        ("oom", "dmesg (OOM killer)", system.oom_kills),
        ("versions", "pip show", software.pip_show), ("versions", "pip list", software.pip_list),
        ("versions", "ds_report", software.ds_report), ("inspect", "ds-triage inspect", saved.inspect),
        ("config", "config (ds_config, Trainer or accelerate)", software.config),
        ("head", "head -c", content.head), ("keys", "torch.load keys", content.keys),
        ("latest", "cat latest", content.latest), ("versions", "release number", software.release),
    )


LISTING_KINDS = ("stat", "tree", "ls", "find", "du")


class Evidence(Record):
    """One pasted output, read by its shape. A Record, not a dataclass: `classify` imports this package
    for its deciding question, and classify never pays for dataclasses (triage/record.py)."""

    _fields = ("kind", "what", "text", "command", "facts", "source")

    def __init__(self, kind: str, what: str, text: str, command: str = "", facts: dict | None = None,
                 source: str = ""):
        self.kind = kind  # listing, namei, identity, mounts, memory, gpus, oom, versions, inspect, config, head, keys,
        # latest, log
        self.what = what  # the command that printed it, in words ("ls -l", "pip show")
        self.text = text  # the lines it was read from
        self.command = command  # the command line, when the paste showed it
        self.facts = {} if facts is None else facts  # listing: {"entries": [listing.Entry]}; the others: their facts
        self.source = source  # the file it was read from (`triage --evidence FILE`), when not a paste

    def label(self) -> str:
        said = f"`{self.command}`" if self.command else f"the pasted {self.what} output"
        return f"{said} in {self.source}" if self.source else said


def read(text: str) -> list[Evidence]:
    """Every block of `text` as evidence; unrecognised lines as one `log` Evidence (per block)."""
    out: list[Evidence] = []
    for command, lines in _blocks(text):
        out += _read_block(command, lines)
    return out


def has_evidence(items: list[Evidence]) -> bool:
    return any(e.kind != "log" for e in items)


def log_text(items: list[Evidence]) -> str:
    return "\n".join(e.text for e in items if e.kind == "log")


def _blocks(text: str) -> list[tuple[str, list[str]]]:
    blocks: list[tuple[str, list[str]]] = [("", [])]
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        m = PROMPT.match(line)
        if m:
            blocks.append((m["command"].strip(), []))
        else:
            blocks[-1][1].append(line)
    return [(c, lines) for c, lines in blocks if c or any(line.strip() for line in lines)]


def _read_block(command: str, lines: list[str]) -> list[Evidence]:
    from triage.evidence import listing  # only when a paste is read

    left = list(range(len(lines)))  # indices not yet claimed
    out: list[Evidence] = []
    entries: list[listing.Entry] = []
    tools: list[str] = []
    for kind, what, parse in kinds():
        rest = [lines[i] for i in left]
        if not any(line.strip() for line in rest):
            break
        if kind in LISTING_KINDS:
            found, claimed = (listing.ls(rest, _ls_base(command)) if kind == "ls"
                              else parse(rest, "*" in command) if kind == "stat" else parse(rest))
            if kind == "find" and len(claimed) < 2 and not command.startswith("find"):
                continue  # one bare path is an answer or a log line, not a listing
            if claimed:
                entries += found
                tools.append(what)
        else:
            result = parse(rest, command)
            if result is None:
                continue
            facts, claimed = result
            out.append(Evidence(kind, what, "\n".join(rest[i] for i in claimed), command, facts))
        left = [index for n, index in enumerate(left) if n not in set(claimed)]
    if entries:
        out.insert(0, Evidence("listing", "/".join(tools), "\n".join(lines), command, {"entries": entries}))
        left = _latest_before_listing(lines, left, out)
    rest = "\n".join(lines[i] for i in left)
    if rest.strip():
        out.append(Evidence("log", "log text", rest, command))
    return out


def _latest_before_listing(lines: list[str], left: list[int], out: list[Evidence]) -> list[int]:
    """`cat latest; echo; ls -la ...` pasted after a log: the tag name just above the listing."""
    from triage.evidence import content

    if any(e.kind == "latest" for e in out):
        return left
    for i in left:
        nxt = next((j for j in range(i + 1, len(lines)) if lines[j].strip()), None)
        if nxt is not None and nxt not in left and content.TAG_LIKE.match(lines[i].strip()):
            out.append(Evidence("latest", "cat latest", lines[i].strip(), "", {"latest": lines[i].strip(), "path": None}))
            return [j for j in left if j != i]
    return left


def _ls_base(command: str) -> str:
    """The dir a one-dir `ls -l DIR` listed (its rows name no dir); "." when it is not known."""
    words = command.split()
    if words[:1] == ["sudo"]:
        words = words[1:]
    paths = [w for w in words[1:] if not w.startswith("-")]
    return paths[0].rstrip("/") or "/" if words[:1] == ["ls"] and len(paths) == 1 else "."
