"""Find a DeepSpeed checkpoint from whatever path the user has, and read its layout from file names.

Accepted: the checkpoint root (the `--load`/save dir, holding `latest` and the tag dirs), a tag
dir (`global_stepN`), one shard file, `latest` itself, a Hugging Face Trainer `checkpoint-N`
dir (a root) or its output dir (holding `checkpoint-N` dirs). Only directory listings and
`latest` are read here; nothing is ever written. Whatever leads outside the root (a symlink, a
`..` in `latest`) or is no regular file (a FIFO, a device) is left out and kept in `refused`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from triage.probe import confine

LATEST_MAX_BYTES = 4096
TAG_MAX_CHARS = 255  # a directory name (NAME_MAX)

# File name -> kind, for the files DeepSpeed writes into a tag dir (one table: classify reads it too).
from triage.analysis.shard_names import SHARD_PATTERNS, match_name  # noqa: E402,F401
HF_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
HF_WEIGHTS = ("pytorch_model.bin", "model.safetensors", "adapter_model.safetensors", "adapter_model.bin",
              "pytorch_model.bin.index.json", "model.safetensors.index.json", "trainer_state.json")


@dataclass(frozen=True)
class ShardName:
    name: str
    kind: str
    dp: int | None = None
    mp: int | None = None
    bf16: bool = False
    layer: int | None = None
    repr: str | None = None


def parse_name(name: str) -> ShardName | None:
    found = match_name(name)
    if found is None:
        return None
    kind, g = found
    return ShardName(name, kind, _int(g.get("dp")), _int(g.get("mp")), bool(g.get("bf16")),
                     _int(g.get("layer")), g.get("repr"))


def _int(value) -> int | None:
    return int(value) if value is not None else None


@dataclass
class TagListing:
    tag: str
    path: str
    exists: bool
    error: str | None = None  # the tag dir exists but could not be listed
    shards: list[ShardName] = field(default_factory=list)
    other: list[str] = field(default_factory=list)
    universal: bool = False  # a `zero/` folder: ds_to_universal output
    refused: dict[str, str] = field(default_factory=dict)  # name -> why it is not read (confine)

    def of(self, *kinds: str) -> list[ShardName]:
        return [s for s in self.shards if s.kind in kinds]


@dataclass
class NameLayout:
    """What the file names alone say about how the checkpoint was saved."""
    stage_family: str | None  # "0", "1/2", "3", or None when the names cannot tell
    dp: int | None
    mp: int | None
    bf16: bool | None
    layers: list[int]
    experts: bool
    universal: bool

    def describe(self) -> str:
        parts = []
        stage = {"0": "ZeRO-0 (no optimizer shards)", "1/2": "ZeRO-1/2", "3": "ZeRO-3"}.get(self.stage_family or "", "stage unknown")
        parts.append(stage)
        if self.dp is not None:
            parts.append(f"dp {self.dp}")
        if self.mp is not None:
            parts.append(f"mp {self.mp}")
        if self.bf16 is not None:
            parts.append("bf16 optimizer files" if self.bf16 else "no bf16_ prefix")
        if self.layers:
            parts.append(f"pipeline layer files {len(self.layers)}")
        if self.experts:
            parts.append("MoE expert files")
        if self.universal:
            parts.append("universal checkpoint (zero/ folder)")
        return ", ".join(parts)


def name_layout(listing: TagListing) -> NameLayout:
    zero3 = listing.of("zero3_model")
    optim = listing.of("optim")
    model = listing.of("model")
    if zero3:
        family = "3"
    elif optim:
        family = "1/2"
    elif model:
        family = "0"
    else:
        family = None
    ranked = zero3 + optim
    dp = max(s.dp for s in ranked) + 1 if ranked else (1 if model else None)
    mps = [s.mp for s in zero3 + optim + model if s.mp is not None]
    return NameLayout(
        stage_family=family, dp=dp, mp=max(mps) + 1 if mps else None,
        bf16=any(s.bf16 for s in optim) if optim else None,
        layers=sorted({s.layer for s in listing.of("layer") if s.layer is not None}),
        experts=bool(listing.of("expert", "expert_optim")), universal=listing.universal,
    )


@dataclass
class Latest:
    path: str
    exists: bool = False
    text: str | None = None
    error: str | None = None
    refused: str | None = None  # why it was not read (confine): outside the root, not a regular file


@dataclass
class Checkpoint:
    given: str
    given_kind: str  # root, tag_dir, shard, latest_file, hf_output, missing, not_a_checkpoint
    root: str | None = None
    tag: str | None = None  # the tag the probes look at
    tag_source: str | None = None  # given, latest, newest, log (set by cli.probe.context_from)
    latest: Latest | None = None
    tags: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # path -> why it could not be listed
    hf_weights: list[str] = field(default_factory=list)  # HF files found where no DeepSpeed state is
    refused: dict[str, str] = field(default_factory=dict)  # path -> why it is not followed (confine)
    _listings: dict[str, TagListing] = field(default_factory=dict, repr=False)

    def listing(self, tag: str | None = None) -> TagListing | None:
        tag = tag or self.tag
        if self.root is None or tag is None:
            return None
        if tag not in self._listings:
            self._listings[tag] = list_tag(self.root, tag, confined=self.given_kind not in ("tag_dir", "shard"))
        return self._listings[tag]

    def has_tag_dir(self, name: str) -> bool | None:
        """Whether the root holds a dir `name` (None: not known, for a checkpoint known from a listing)."""
        return os.path.isdir(os.path.join(self.root, name))

    @property
    def tag_dir(self) -> str | None:
        return os.path.join(self.root, self.tag) if self.root and self.tag else None


def list_tag(root: str, tag: str, confined: bool = True) -> TagListing:
    """The tag's files by kind. confined=False when the user named the tag dir itself: it may be a
    symlink anywhere, but its files still may not lead out of it."""
    path = os.path.join(root, tag)
    listing = TagListing(tag=tag, path=path, exists=os.path.isdir(path))
    if not listing.exists:
        return listing
    if confined and not confine.is_inside(root, path):
        listing.error = "leads outside the checkpoint root (a symlink or `..`): not followed"
        return listing
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        listing.error = f"{type(exc).__name__}: {exc.strerror or exc}"
        return listing
    for name in names:
        why = _unsafe(path, os.path.join(path, name))
        if why:
            listing.refused[name] = why
            continue
        shard = parse_name(name)
        if shard:
            listing.shards.append(shard)
        elif name == "zero" and os.path.isdir(os.path.join(path, name)):
            listing.universal = True
        else:
            listing.other.append(name)
    return listing


def _unsafe(root: str, path: str) -> str | None:
    """Why `path` must not be read, or None: it leads outside `root`, is a symlink loop, a FIFO, device
    or socket, or a hard link with a name outside `root` (confine.refusal)."""
    return confine.refusal(root, path)


def _listdir(path: str, errors: dict) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError as exc:
        errors[path] = f"{type(exc).__name__}: {exc.strerror or exc}"
        return []


def _has_shards(path: str) -> bool:
    try:
        return any(parse_name(n) for n in os.listdir(path)) or os.path.isdir(os.path.join(path, "zero"))
    except OSError:
        return False


def read_latest(root: str, name: str = "latest") -> Latest:
    """`latest` (or another pointer DeepSpeed reads the same way: `latest_universal`), confined."""
    latest = Latest(path=os.path.join(root, name))
    latest.exists = os.path.lexists(latest.path)
    if not latest.exists:
        return latest
    try:
        with confine.open_regular(latest.path, root) as f:
            data = f.read(LATEST_MAX_BYTES + 1)
    except confine.Refused as exc:
        latest.error = latest.refused = exc.strerror
        return latest
    except OSError as exc:
        latest.error = f"{type(exc).__name__}: {exc.strerror or exc}"
        return latest
    if len(data) > LATEST_MAX_BYTES:
        latest.error = f"more than {LATEST_MAX_BYTES} bytes: not a `latest` file"
        return latest
    if b"\0" in data:
        latest.error = "binary content (NUL bytes)"
        return latest
    text = data.decode("utf-8", errors="replace").strip()
    if len(text) > TAG_MAX_CHARS or any(c < " " or c == "\x7f" for c in text):
        # not a tag DeepSpeed could have written: possibly another file's content, so never shown
        latest.error = latest.refused = (f"{len(data)} bytes that are not a tag name (over {TAG_MAX_CHARS} characters "
                                         "or control characters): not shown")
        return latest
    latest.text = text  # a hard link out of the root was refused unread by open_regular
    return latest


def step_key(tag: str):
    numbers = re.findall(r"\d+", tag)
    return (int(numbers[-1]) if numbers else -1, tag)


def find_tags(root: str, errors: dict, refused: dict | None = None) -> list[str]:
    """Subdirectories that hold DeepSpeed shards (or are named like a tag, when unlistable); one that
    leads outside the root goes to `refused` instead."""
    tags = []
    for name in _listdir(root, errors):
        path = os.path.join(root, name)
        if not os.path.isdir(path) or HF_CHECKPOINT.match(name):
            continue
        if not confine.is_inside(root, path):
            if refused is not None:
                refused[path] = "a tag dir that leads outside the checkpoint root (a symlink): not followed"
            continue
        if _has_shards(path) or (not os.access(path, os.R_OK | os.X_OK) and re.match(r"^global_step\d+", name)):
            tags.append(name)
    return sorted(tags, key=step_key)


def _is_root(path: str, errors: dict) -> bool:
    if os.path.lexists(os.path.join(path, "latest")):
        return True
    return bool(find_tags(path, errors))


def locate(given: str) -> Checkpoint:
    """The checkpoint `given` belongs to; never raises (given_kind says what was found)."""
    path = os.path.abspath(given)
    if not os.path.lexists(path):
        return Checkpoint(given=given, given_kind="missing")
    if os.path.isfile(path):
        name, parent = os.path.basename(path), os.path.dirname(path)
        if name == "latest":
            return _finish(Checkpoint(given=given, given_kind="latest_file", root=parent))
        if parse_name(name):
            ckpt = Checkpoint(given=given, given_kind="shard", root=os.path.dirname(parent),
                              tag=os.path.basename(parent), tag_source="given")
            return _finish(ckpt)
        return Checkpoint(given=given, given_kind="not_a_checkpoint")
    errors: dict[str, str] = {}
    if _has_shards(path) and not os.path.lexists(os.path.join(path, "latest")):
        ckpt = Checkpoint(given=given, given_kind="tag_dir", root=os.path.dirname(path),
                          tag=os.path.basename(path), tag_source="given")
        return _finish(ckpt)
    if _is_root(path, errors):
        return _finish(Checkpoint(given=given, given_kind="root", root=path, errors=errors))
    names = _listdir(path, errors)
    hf = sorted((n for n in names if HF_CHECKPOINT.match(n) and _is_root(os.path.join(path, n), {})),
                key=step_key)
    if hf:
        return _finish(Checkpoint(given=given, given_kind="hf_output", root=os.path.join(path, hf[-1]), errors=errors))
    ckpt = Checkpoint(given=given, given_kind="not_a_checkpoint", errors=errors)
    ckpt.hf_weights = [n for n in names if n in HF_WEIGHTS]
    # a Trainer output dir: resume_from_checkpoint=True takes its newest checkpoint-N, with or without
    # DeepSpeed state in it
    newest = sorted((n for n in names if HF_CHECKPOINT.match(n) and os.path.isdir(os.path.join(path, n))
                     and not os.path.islink(os.path.join(path, n))), key=step_key)  # a link may lead out: not followed
    if not ckpt.hf_weights and newest:
        ckpt.hf_weights = [f"{newest[-1]}/{n}" for n in _listdir(os.path.join(path, newest[-1]), errors)
                           if n in HF_WEIGHTS]
    return ckpt


def _finish(ckpt: Checkpoint) -> Checkpoint:
    ckpt.tags = find_tags(ckpt.root, ckpt.errors, ckpt.refused)
    ckpt.latest = read_latest(ckpt.root)
    if ckpt.latest.refused:
        ckpt.refused[ckpt.latest.path] = ckpt.latest.refused
    named = ckpt.latest.text or None
    if named and not confine.is_inside(ckpt.root, os.path.join(ckpt.root, named)):
        ckpt.refused[ckpt.latest.path] = (f"names {confine.shown(named)}, which leads outside the checkpoint root: "
                                          "not followed")
        named = None
    if ckpt.tag is None:
        if named:
            ckpt.tag, ckpt.tag_source = named, "latest"
        elif ckpt.tags:
            ckpt.tag, ckpt.tag_source = ckpt.tags[-1], "newest"
    return ckpt
