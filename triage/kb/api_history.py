"""Name the version skew: which DeepSpeed releases define a missing name or keyword.

Reads the committed index (api_history.json, built by api_history_build.py from
the real releases) only when a log's primary exception is an AttributeError on a
DeepSpeed object, an unexpected keyword to load_checkpoint/save_checkpoint, or an
ImportError of a DeepSpeed name, so classify's cold start does not pay for it.
"""

from __future__ import annotations

import json
import re
import sys
from functools import cache
from pathlib import Path

INDEX_PATH = Path(__file__).with_name("api_history.json")

_ATTRIBUTE = re.compile(r"'(?P<owner>\w+)' object has no attribute '(?P<name>\w+)'")
# pickle's lookup of a class it names: the checkpoint was pickled by a release that had it there
_PICKLED = re.compile(r"Can't get attribute '(?P<name>\w+)' on <module '(?P<owner>deepspeed[\w.]*)'")
_MODULE_ATTRIBUTE = re.compile(r"module '(?P<owner>deepspeed[\w.]*)' has no attribute '(?P<name>\w+)'")
# Python 3.10+ prints the qualified name; before, the bare one (then the call site names it).
_KEYWORD = re.compile(r"(?:(?P<owner>\w{1,80})\.|\b)(?P<method>load_checkpoint|save_checkpoint)\(\) "
                      r"got an unexpected keyword argument '(?P<name>\w+)'")
_ENGINES = {None, "DeepSpeedEngine", "PipelineEngine", "DeepSpeedHybridEngine"}  # not Trainer.save_checkpoint
_IMPORT_NAME = re.compile(r"cannot import name '(?P<name>\w+)' from '(?P<owner>deepspeed[\w.]*)'")
_NO_MODULE = re.compile(r"No module named '(?P<name>deepspeed\.[\w.]+)'")  # not deepspeed itself: not installed

_KINDS = {"AttributeError", "TypeError", "ImportError", "ModuleNotFoundError"}
_SUCCESSOR_CUTOFF = 60  # rapidfuzz ratio: below this a "successor" is a guess


@cache
def load_index() -> dict:
    return json.loads(INDEX_PATH.read_text())


def api_history(exception, versions: dict[str, str]) -> list[dict]:
    """Notes for the primary exception, or [] when it names no DeepSpeed API."""
    if exception is None or exception.short_type not in _KINDS:
        return []
    lookup = _lookup(exception.short_type, exception.message)
    if lookup is None:
        return []
    kind, owner, name, section, key = lookup
    index = load_index()["deepspeed"]
    table = index[section] if key is None else index[section].get(key)
    if table is None:  # an object or module the index does not track
        return []
    releases = index["releases"]
    note = {"kind": kind, "name": name, "owner": owner, "exists_in": None,
            "first": None, "last": None, "successor": None}
    span = table.get(name)
    if span:
        note.update(first=releases[span[0]], last=releases[span[1]], exists_in=_range(releases, span))
        later = {n: s for n, s in table.items() if s[0] > span[1]}
    else:
        later = {n: s for n, s in table.items() if s[1] == len(releases) - 1}
    note["successor"] = _successor(name, later, releases)
    note["versions"] = _compare(span, releases, versions)
    note["callers"] = _callers(section, key, name)
    note["text"] = _sentence(note, releases)
    return [note]


def _lookup(kind: str, message: str) -> tuple[str, str, str, str, str | None] | None:
    """(kind, owner, name, index section, key in it) by the message's shape."""
    if kind == "AttributeError":
        if m := _PICKLED.search(message):
            return "pickled", m["owner"], m["name"], "module_names", m["owner"]
        if m := _MODULE_ATTRIBUTE.search(message):
            return "module_name", m["owner"], m["name"], "module_names", m["owner"]
        if m := _ATTRIBUTE.search(message):
            return "attribute", m["owner"], m["name"], "classes", m["owner"]
    elif kind == "TypeError":
        if (m := _KEYWORD.search(message)) and m["owner"] in _ENGINES:
            owner = f"{m['owner'] or 'DeepSpeedEngine'}.{m['method']}"
            return "keyword", owner, m["name"], "keywords", m["method"]
    elif m := _IMPORT_NAME.search(message):
        return "module_name", m["owner"], m["name"], "module_names", m["owner"]
    elif m := _NO_MODULE.search(message):
        return "module", "deepspeed", m["name"], "modules", None
    return None


def _callers(section: str, method: str | None, name: str) -> list[dict]:
    """The framework releases that pass this keyword (the other side of the skew)."""
    if section != "keywords":
        return []
    out = []
    for project, calls in sorted(load_index()["callers"].items()):
        if span := calls["keywords"].get(method, {}).get(name):
            out.append({"project": project, "passes_in": _range(calls["releases"], span)})
    return out


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _range(releases: list[str], span: list[int]) -> str:
    first, last = _minor(releases[span[0]]), _minor(releases[span[1]])
    if span[1] == len(releases) - 1:
        return f"{first} to {last} (the newest indexed)"
    return first if first == last else f"{first} to {last}"


def _successor(name: str, candidates: dict[str, list[int]], releases: list[str]) -> dict | None:
    if not candidates:
        return None
    from rapidfuzz import fuzz, process  # C extension, only when a skew is being named

    best = process.extractOne(name, list(candidates), scorer=fuzz.ratio, score_cutoff=_SUCCESSOR_CUTOFF)
    if best is None:
        return None
    span = candidates[best[0]]
    return {"name": best[0], "from": _minor(releases[span[0]]), "exists_in": _range(releases, span)}


def installed_deepspeed() -> str | None:
    """The installed release, without importing deepspeed (too slow, needs torch)."""
    module = sys.modules.get("deepspeed")
    if module is not None and getattr(module, "__version__", None):
        return module.__version__
    try:
        from importlib.metadata import PackageNotFoundError, version
        return version("deepspeed")
    except (PackageNotFoundError, ValueError):
        return None


def _compare(span, releases: list[str], versions: dict[str, str]) -> list[dict]:
    """Whether each known release (installed, the log's, the checkpoint's) has the name."""
    sources = {"installed": installed_deepspeed(), "log": versions.get("deepspeed"),
               "checkpoint": versions.get("checkpoint_deepspeed")}
    out = []
    for source, version in sources.items():
        version = (version or "").rstrip(",;.")  # DeepSpeed prints "version=0.14.5, git-hash=..."
        if not version:
            continue
        inside = None
        if span:
            key = _key(version)
            inside = _key(releases[span[0]])[:2] <= key[:2] <= _key(releases[span[1]])[:2]
        out.append({"source": source, "version": version, "inside": inside})
    return out


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


def _sentence(note: dict, releases: list[str]) -> str:
    name, owner = note["name"], note["owner"]
    what = {"attribute": f"`{owner}.{name}`", "keyword": f"keyword `{name}` of `{owner}()`",
            "module_name": f"`{owner}.{name}`", "module": f"module `{name}`",
            "pickled": f"`{owner}.{name}`, which the checkpoint's pickle names,"}[note["kind"]]
    span = f"DeepSpeed {_minor(releases[0])} to {_minor(releases[-1])}"
    text = (f"{what} exists in DeepSpeed {note['exists_in']}" if note["exists_in"]
            else f"{what} is in no DeepSpeed release indexed ({span})")
    if successor := note["successor"]:
        holder = {"attribute": f"`{owner}`", "keyword": f"`{owner}()`",
                  "module_name": f"`{owner}`", "module": "DeepSpeed", "pickled": f"`{owner}`"}[note["kind"]]
        text += f"; from {successor['from']} {holder} has `{successor['name']}`"
    for caller in note["callers"]:
        text += f"; {caller['project']} {caller['passes_in']} passes it"
    for seen in note["versions"]:
        if seen["inside"] is not None:
            who = {"installed": "installed here", "log": "the log's", "checkpoint": "the checkpoint's"}[seen["source"]]
            text += f"; {who} {seen['version']} {'has' if seen['inside'] else 'lacks'} it"
    return text
