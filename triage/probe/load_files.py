"""The files a real load of a checkpoint may open: the trust gate's list (issue 40).

Read off DeepSpeed 0.19.8's own loading code, and kept a superset of it:

* which tags: the one asked for, and the ones `latest` and `latest_universal` name.
  engine.load_checkpoint(tag=None) reads `latest_universal` when the config sets
  checkpoint.load_universal (the saved ds_config or the loading one), `latest` otherwise, and a
  ZeRO-3 load without optimizer state reads `latest` again (zero_to_fp32's
  get_fp32_state_dict_from_zero_checkpoint(load_dir), tag=None) whatever tag it was given. Both
  pointers are followed whatever the config says, so no config can name a tag the gate skipped.
* which files: every regular file under the tag, recursively. The engine globs the tag's top
  level (`*_model_states.pt`, `*_optim_states.pt`, `expp_rank_*`, `layer_*_expert_*`); a universal
  load opens `zero/optimizer_state.pt` and every `zero/<param>/<key>.pt` (base_optimizer.py,
  universal_checkpoint.py, torch.load(weights_only=False)); ds_to_universal walks the whole tag
  (reshape_utils.get_files: os.walk) and loads every file whose *name starts with* `mp_rank_`,
  `layer_` or `(bf16_|fp16_)zero_pp_rank_`, suffix or not. So nothing under a tag is left out by
  name; the gate decides per file which ones a loader could unpickle (`loadable`).

Walked through confine: a symlink (file or directory) that leads out of the root is refused, not
followed; so is anything that is no regular file. A tag with more than MAX_ENTRIES entries or
deeper than MAX_DEPTH is refused, not walked to the end. stdlib only: never imports torch.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field

from triage.probe import confine
from triage.probe.checkpoint import read_latest

POINTERS = ("latest", "latest_universal")  # engine.load_checkpoint: "latest_universal" if load_universal
MAX_ENTRIES = 100_000  # files and dirs under one tag (a universal 70B model has a few thousand)
MAX_DEPTH = 16  # a universal tag is 3 deep: <tag>/zero/<param>/fp32.pt

# Names a DeepSpeed loader may torch.load: every name it builds ends in .pt; ds_to_universal takes
# any file by these prefixes (deepspeed/checkpoint/constants.py *_FILE_PREFIX); .pth/.bin for torch's others.
SUFFIXES = (".pt", ".pth", ".bin")
PREFIXES = ("mp_rank_", "zero_pp_rank_", "bf16_zero_pp_rank_", "fp16_zero_pp_rank_", "layer_", "expp_rank_",
            "expert_")


def loadable(name: str) -> bool:
    """Whether a DeepSpeed loader or converter could torch.load a file of this name."""
    return name.endswith(SUFFIXES) or name.startswith(PREFIXES)


@dataclass
class Discovery:
    root: str
    tags: list[str] = field(default_factory=list)  # the tags a load may read, existing dirs only
    pointers: list[str] = field(default_factory=list)  # pointer files read (paths)
    files: list[str] = field(default_factory=list)  # regular files under the tags (paths, as named)
    refused: dict[str, str] = field(default_factory=dict)  # path -> why it is not read (counts as unverified)


def discover(root: str, tag: str | None = None, pointers=POINTERS) -> Discovery:
    """Every file a load of `root` may open: the tag asked for (if any) and the tags `pointers` name."""
    found = Discovery(root)
    tags = [tag] if tag else []
    for name in pointers:
        named = _pointer(root, name, found)
        if named and os.path.realpath(os.path.join(root, named)) not in {os.path.realpath(os.path.join(root, t))
                                                                           for t in tags}:
            tags.append(named)  # `latest` and `latest_universal` often name the same tag: walked once
    for t in tags:
        add_tag(root, os.path.join(root, t), found)
    return found


def add_tag(root: str, tag_dir: str, found: Discovery) -> None:
    """The files under one tag dir (inside `root`) into `found`."""
    if not os.path.lexists(tag_dir):
        return  # the load fails to find it; nothing there to run
    why = confine.refusal(root, tag_dir)
    if why or not os.path.isdir(tag_dir):
        found.refused[tag_dir] = why or "the tag is not a directory: not read"
        return
    found.tags.append(os.path.relpath(tag_dir, root))
    walk(root, tag_dir, found)


def _pointer(root: str, name: str, found: Discovery) -> str | None:
    """The tag pointer `name` names, read confined; a pointer not read, or naming a tag outside the root,
    is refused: the load would read a tag nobody checked."""
    latest = read_latest(root, name)
    if not latest.exists:
        return None
    if latest.refused:
        found.refused[latest.path] = latest.refused
        return None
    found.pointers.append(latest.path)
    if not latest.text:
        return None  # unreadable or binary: DeepSpeed cannot use it either
    if not confine.is_inside(root, os.path.join(root, latest.text)):
        found.refused[latest.path] = f"names {confine.shown(latest.text)}, which leads outside the checkpoint root"
        return None
    return latest.text


def walk(root: str, top: str, found: Discovery) -> None:
    """Every regular file under `top` into found.files; whatever leads out of `root`, is no regular file,
    cannot be listed or is over a cap into found.refused. Directory symlinks inside the root are followed
    (DeepSpeed's os.path.join follows them) once each."""
    seen: set[str] = set()
    stack, entries = [(top, 0)], 0
    while stack:
        path, depth = stack.pop()
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        try:
            with os.scandir(path) as it:
                names = []
                for entry in it:
                    entries += 1
                    if entries > MAX_ENTRIES:
                        found.refused[top] = f"more than {MAX_ENTRIES} entries: not walked to the end"
                        return
                    names.append(entry.path)
        except OSError as exc:
            found.refused[path] = f"cannot list it: {exc.strerror or exc}"
            continue
        for child in sorted(names):
            _place(root, child, depth, stack, found)


def _place(root: str, path: str, depth: int, stack: list, found: Discovery) -> None:
    try:
        mode = os.stat(path).st_mode if confine.is_inside(root, path) else None
    except OSError:
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        if depth + 1 > MAX_DEPTH:
            found.refused[path] = f"more than {MAX_DEPTH} directories deep: not walked"
        else:
            stack.append((path, depth + 1))
    elif mode is not None and stat.S_ISREG(mode):
        found.files.append(path)  # a hard link out of the root is refused when the gate opens it
    elif loadable(os.path.basename(path)) or os.path.isdir(path):
        found.refused[path] = confine.refusal(root, path) or "cannot stat it: not read"
    # else: no loader opens a file by that name, and it cannot be read to see what it is: left out
