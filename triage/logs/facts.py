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
# The list is its quoted names only: a one-line paste holds both lists, and `.*` took the second for the first.
_KEYS = re.compile(r'(?P<kind>Missing|Unexpected) key\(s\) in state_dict: (?P<keys>(?:"[^"\n]*"(?:, )?)+)')
_KEYS_LITERAL = " key(s) in state_dict: "
_QUOTED = re.compile(r'"([^"\n]+)"')
# torch's copy_ of a saved flat fp32 partition (ZeRO-1/2/3, the bf16 and fp16 optimizers) into the
# load's: tensor a is the load's partition, tensor b the saved one.
_PARTITION = re.compile(r"The size of tensor a \((\d{1,30})\) must match the size of tensor b \((\d{1,30})\)")
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
    path_lines = (line.text for line in lines if "/" in line.text and not line.text.lstrip().startswith('File "'))
    paths: dict[str, None] = {}
    seen: set[str] = set()
    for found in _matches(_PATH, path_lines):  # each path once, in order of appearance
        if len(paths) >= MAX_ITEMS:
            break
        if found in seen:
            continue
        seen.add(found)
        path = found.rstrip(".") or found  # "Begin Load checkpoint from /c/x.pt...": the dots are the sentence's
        if not path.endswith(".py") and _is_checkpoint_path(path):  # .py: source files, not checkpoints
            paths[path] = None
    shards: dict[str, None] = {}
    for found in _matches(_SHARD, (line.text for line in lines if "_states" in line.text or "latest" in line.text)):
        if len(shards) >= MAX_ITEMS:
            break
        shards[found] = None
    for _, param, saved, model in size_mismatches(text):
        if len(incident.size_mismatches) >= MAX_ITEMS:
            break
        incident.size_mismatches.append({"param": param, "checkpoint": saved, "model": model})
    for _, kind, keys in key_lists(text):
        target = incident.missing_keys if kind == "Missing" else incident.unexpected_keys
        for key in keys:
            if len(target) < MAX_ITEMS and key not in target:
                target.append(key)
    partition = flat_partition(text)
    incident.partition = partition[1:] if partition else None
    incident.paths = list(paths)
    incident.shards = list(shards)


# torch's load_state_dict and copy_ complaints, read here for classify and for the probes
# (triage.probe.log_facts): one parser of each, offsets into `text` for a caller's line numbers.
def size_mismatches(text: str):
    """(offset, name, checkpoint shape, model shape) of each `size mismatch for NAME: copying a param
    with shape A from checkpoint, the shape in current model is B`; a shape as a list of ints, or as
    printed when it is none (cut off, garbled)."""
    for match in _SIZE.finditer(text):
        yield match.start(), match["param"].strip(), _shape(match["ckpt"]), _shape(match["model"])


def key_lists(text: str):
    """(offset, "Missing" | "Unexpected", names) of each `Missing key(s) in state_dict: "a", "b"`."""
    # _KEYS starts on an alternation sre tries at every offset: only when its literal is there.
    for match in _KEYS.finditer(text) if _KEYS_LITERAL in text else ():
        yield match.start(), match["kind"], _QUOTED.findall(match["keys"])


def flat_partition(text: str) -> tuple[int, int, int] | None:
    """(offset, saved elements, the load's) of the first `The size of tensor a (N) must match the size
    of tensor b (M)`, or None when there is none or its sizes agree."""
    match = _PARTITION.search(text)
    return (match.start(), int(match[2]), int(match[1])) if match and match[1] != match[2] else None


def _matches(pattern: re.Pattern, texts, size: int = 1 << 20):
    """Each match of a pattern that stays within a line, over lines joined about `size` characters
    at a time: the matches of the joined lines, which a 32 MiB log never holds twice."""
    batch: list[str] = []
    held = 0
    for text in texts:
        batch.append(text)
        held += len(text) + 1
        if held >= size:
            yield from (match.group(0) for match in pattern.finditer("\n".join(batch)))
            batch, held = [], 0
    if batch:
        yield from (match.group(0) for match in pattern.finditer("\n".join(batch)))


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
