"""What a file holds, as printed: `cat latest` (one tag name), `head -c N FILE` (a Git LFS pointer, an
HTML error page, a zip header), and the keys a `torch.load(..., weights_only=True)` printed. Parsers
return (facts, claimed line indices) or None."""

from __future__ import annotations

import ast
import re

TAG = re.compile(r"^[\w.\-]{1,255}$")
TAG_LIKE = re.compile(r"^(?:global_step\d+|checkpoint-\d+|pytorch_model|[\w.\-]*step_?\d+)$")
LFS = re.compile(r"^version https://git-lfs\.github\.com/spec/v1\s*$")
LFS_SIZE = re.compile(r"^size (?P<size>\d+)\s*$")
HTML = re.compile(r"^\s*(?:<!DOCTYPE html|<html|<\?xml|<head>|<title>)", re.I)
KEYS = re.compile(r"^(?:(?:odict_|dict_)keys\()?\[(?P<items>['\"][^\]]*)\]\)?$")
COMMAND_FILE = re.compile(r"(?:cat|head(?:\s+-c\s*\d+|\s+--bytes[= ]\d+)?)\s+(?P<path>\S+)\s*(?:[|;]|$)")
CAT_LATEST = re.compile(r"\bcat\s+(\S*latest)\b")
TORCH_LOAD = re.compile(r"torch\.load\(\s*['\"]([^'\"]+)['\"]")


def latest(lines: list[str], command: str = ""):
    """`cat DIR/latest`: one line, a tag name. Without the command line it must look like a tag."""
    body = [i for i, line in enumerate(lines) if line.strip()]
    if len(body) != 1:
        return None
    text = lines[body[0]].strip()
    named = CAT_LATEST.search(command)
    if not TAG.match(text) or not (named or TAG_LIKE.match(text)):
        return None
    return {"latest": text, "path": named.group(1) if named else None}, body


def head(lines: list[str], command: str = ""):
    """`head -c N FILE`: the first bytes of a shard that should be a torch.save zip."""
    m = COMMAND_FILE.search(command)
    path = m["path"] if m and m["path"] != "latest" else None
    if lines and LFS.match(lines[0]):
        size = next((int(LFS_SIZE.match(line)["size"]) for line in lines if LFS_SIZE.match(line)), None)
        return {"file": path, "problem": "lfs_pointer", "detail": "a Git LFS pointer file, not the data (git lfs pull)"
                + (f"; the real file is {size} bytes" if size else "")}, list(range(len(lines)))
    if lines and HTML.match(lines[0]):
        return {"file": path, "problem": "garbage", "detail": "an HTML page (a download's error page?), not a "
                "torch.save archive"}, list(range(len(lines)))
    if path and lines and lines[0].startswith("PK\x03\x04"):
        return {"file": path, "problem": None, "detail": "starts like a zip archive (torch.save)"}, list(range(len(lines)))
    return None


def keys(lines: list[str], command: str = ""):
    """The printed keys of a torch.load result: `['module', 'buffer_names', ...]` or odict_keys([...])."""
    body = [i for i, line in enumerate(lines) if line.strip()]
    if len(body) != 1:
        return None
    m = KEYS.match(lines[body[0]].strip())
    if not m:
        return None
    try:
        items = ast.literal_eval("[" + m["items"] + "]")  # strings only: a literal, never code
    except (ValueError, SyntaxError):
        return None
    if not all(isinstance(k, str) for k in items):
        return None
    return {"keys": items, "file": _loaded(command)}, body


def _loaded(command: str) -> str | None:
    m = TORCH_LOAD.search(command)
    return m.group(1) if m else None
