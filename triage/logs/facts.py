"""Facts a rule or a probe can use, lifted from anywhere in the log."""

from __future__ import annotations

import re

from triage.logs.normalize import Line

# A version and what may follow it (+cu121, .dev0, rc1); punctuation after it is the
# sentence's, not the version's: "version=0.19.8, git-hash=..." is 0.19.8.
_VERSION = r"(\d+\.\d+\.\d+[\w.+-]*)"
_VERSION_END = ".+-"
# Each pattern is linear: a quantifier never overlaps the next one (`\s*(?:\.+\s*)?`, not
# `\s*\.*\s*`, which is quadratic on a run of spaces), and every one starts on a literal.
_VERSIONS = (
    ("deepspeed", re.compile(r"DeepSpeed info: version=" + _VERSION)),
    # Literal first: a leading \b would stop sre's fast literal scan over a multi-MB log.
    ("deepspeed", re.compile(r"deepspeed (?:version|install version)\s*(?:\.+\s*)?\[?" + _VERSION)),
    ("torch", re.compile(r"torch (?:version|install version)\s*(?:\.+\s*)?\[?" + _VERSION)),
    ("checkpoint_deepspeed", re.compile(r"ds_version['\"]?\s*[:=]\s*['\"]?" + _VERSION)),
)
# A local path: not preceded by a word, a dot (./rel) or a slash, so that the host and path
# of a URL (https://host/x, s3://bucket/key) are not taken for one. The "/" comes first and
# the look-behind after it (over the character before the slash): a leading literal lets sre
# skip from slash to slash, three times faster than a look-behind tried at every offset.
_PATH = re.compile(r"(/(?<![\w./]/)(?:[\w.@+-]+/)*[\w.@+-]+)")
_SHARD = re.compile(
    r"(?:zero_pp_rank_\d+_mp_rank_\d+_(?:model|optim)_states\.pt"
    r"|bf16_zero_pp_rank_\d+_mp_rank_\d+_optim_states\.pt"
    r"|mp_rank_\d+_model_states\.pt|layer_\d+-model_\d+-model_states\.pt|layer_\d+-model_states\.pt"
    r"|expp_rank_\d+_mp_rank_\d+_optim_states\.pt|\blatest\b(?=['\"\s]|$))"
)
# A parameter name holds no space or colon, a shape only digits, commas and spaces: each part
# stops where the next begins, so "size mismatch for " repeated costs a few steps each.
_SHAPE = r"torch\.Size\(\[[\d, ]*\]\)"
_SIZE = re.compile(
    rf"size mismatch for (?P<param>[^:\s]+): copying a param with shape (?P<ckpt>{_SHAPE}|\S+)"
    rf" from checkpoint, the shape in current model is (?P<model>{_SHAPE}|[^.\s]+)"
)
_KEYS = re.compile(r"(?P<kind>Missing|Unexpected) key\(s\) in state_dict: (?P<keys>.*)")
_KEYS_LITERAL = " key(s) in state_dict: "
_QUOTED = re.compile(r'"([^"]+)"')
MAX_ITEMS = 200  # keep JSON small on a log that lists 10,000 keys


def extract(lines: list[Line], incident) -> None:
    # One regex pass over the joined log per fact, not a Python loop per line:
    # a 5,000-line paste must classify in tens of milliseconds.
    text = "\n".join(line.text for line in lines)
    for name, pattern in _VERSIONS:
        if name not in incident.versions:
            match = pattern.search(text)
            if match:
                incident.versions[name] = match.group(1).rstrip(_VERSION_END)
    # The path and shard patterns start with no literal, so sre tries them at every
    # position: give them only the lines a cheap substring test lets through.
    path_text = "\n".join(line.text for line in lines if "/" in line.text and not line.text.lstrip().startswith('File "'))
    shard_text = "\n".join(line.text for line in lines if "_states" in line.text or "latest" in line.text)
    paths: dict[str, None] = {}
    for path in dict.fromkeys(_PATH.findall(path_text)):  # unique, in order of appearance
        if len(paths) >= MAX_ITEMS:
            break
        path = path.rstrip(".") or path  # "Begin Load checkpoint from /c/x.pt...": the dots are the sentence's
        if not path.endswith(".py") and _is_checkpoint_path(path):  # .py: source files, not checkpoints
            paths[path] = None
    shards: dict[str, None] = {}
    for match in _SHARD.finditer(shard_text):
        if len(shards) >= MAX_ITEMS:
            break
        shards[match.group(0)] = None
    for match in _SIZE.finditer(text):
        if len(incident.size_mismatches) >= MAX_ITEMS:
            break
        incident.size_mismatches.append(
            {"param": match["param"].strip(), "checkpoint": _shape(match["ckpt"]), "model": _shape(match["model"])}
        )
    # _KEYS starts on an alternation sre tries at every offset: only when its literal is there.
    for match in _KEYS.finditer(text) if _KEYS_LITERAL in text else ():
        target = incident.missing_keys if match["kind"] == "Missing" else incident.unexpected_keys
        for key in _QUOTED.findall(match["keys"]):
            if len(target) < MAX_ITEMS and key not in target:
                target.append(key)
    incident.paths = list(paths)
    incident.shards = list(shards)


def _is_checkpoint_path(path: str) -> bool:
    # Source paths of the stack are noise; checkpoint paths are the facts.
    if path.startswith(("/usr/", "/bin/", "/sbin/", "/etc/", "/proc/", "/dev/", "/sys/", "/lib")):
        return False
    return not any(part in path for part in ("site-packages", "dist-packages", "/lib/python"))


_SHAPE_TEXT = re.compile(r"torch\.Size\(\[([\d, ]*)\]\)")
MAX_DIM_DIGITS = 30  # more is no shape a log prints: kept as text (int() refuses 4,300+ digits)


def _shape(text: str) -> list[int] | str:
    """torch.Size([4, 8]) -> [4, 8]; anything else (torch.Size([1x]), a cut-off shape) as it was printed."""
    match = _SHAPE_TEXT.fullmatch(text)
    if not match:
        return text
    dims = [x.strip() for x in match.group(1).split(",")]
    if dims == [""]:
        return []
    if not all(d.isdigit() and len(d) <= MAX_DIM_DIGITS for d in dims):
        return text
    return [int(d) for d in dims]
