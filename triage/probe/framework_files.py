"""The files a framework saves beside a DeepSpeed checkpoint, and whether each is whole.

transformers' Trainer, accelerate and PEFT write their own state next to (or instead of)
DeepSpeed's shards: torch.save archives (scheduler, RNG states, training arguments, a plain
optimizer) and safetensors weights. A resume reads them too, and a damaged one fails the load
with the same torch or safetensors error a damaged shard gives. Structure only: the zip check of
probe/zipcheck.py, and a safetensors file's header against its size; never a pickle read (these
name the frameworks' own classes, which the DeepSpeed allow-list does not cover).
"""

from __future__ import annotations

import json
import os
import re
import struct

from triage.probe import confine, zipcheck

# torch.save'd by transformers' Trainer (scheduler.pt, rng_state*.pth, optimizer.pt, scaler.pt,
# training_args.bin), accelerate's save_state (scheduler*.bin, random_states_*.pkl, optimizer*.bin,
# custom_checkpoint_*.pkl) and PyTorch weights (pytorch_model*.bin, adapter_model.bin)
TORCH_SAVED = re.compile(r"^(?:scheduler(?:_\d+)?\.(?:pt|bin)|optimizer(?:_\d+)?\.(?:pt|bin)|scaler\.pt|rng_state(?:_\d+)?\.pth"
                         r"|random_states_\d+\.pkl|custom_checkpoint_\d+\.pkl|training_args\.bin"
                         r"|pytorch_model(?:[-_][\w-]+)?\.bin|adapter_model\.bin)$")
SAFETENSORS = re.compile(r"^[\w.-]+\.safetensors$")
DEPTH = 2  # the dir given, its checkpoint-N or model/ and adapter/ dirs, and theirs
MAX_FILES = 256
MAX_HEADER = 100 * 1024 * 1024  # the header limit safetensors itself enforces


def base(given: str) -> str:
    """The dir the framework files are looked for under: the path given, or the dir of a file given."""
    return given if os.path.isdir(given) else os.path.dirname(given)


def find(base: str) -> list[str]:
    """The framework files under `base` (DEPTH levels, links not followed), at most MAX_FILES."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(base):
        depth = os.path.relpath(dirpath, base).count(os.sep) + (dirpath != base)
        dirnames[:] = sorted(d for d in dirnames if depth < DEPTH and not os.path.islink(os.path.join(dirpath, d)))
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            if (TORCH_SAVED.match(name) or SAFETENSORS.match(name)) and not os.path.islink(path):
                found.append(path)
                if len(found) >= MAX_FILES:
                    return found
    return found


def problem(path: str, root: str) -> tuple[str, str] | None:
    """(integrity signal, what is wrong) for a damaged file, else None (whole, or not checkable)."""
    if path.endswith(".safetensors"):
        return _safetensors(path, root)
    z = zipcheck.check(path)
    return (z.problem, z.detail) if z.problem else None


def _safetensors(path: str, root: str) -> tuple[str, str] | None:
    """An 8-byte little-endian header length, that much JSON, then exactly the bytes its tensors'
    data_offsets end at."""
    try:
        with confine.open_regular(path, root) as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) < 8:
                return ("empty" if size == 0 else "truncated"), f"{size} bytes: shorter than a safetensors header length"
            (length,) = struct.unpack("<Q", head)
            if length > MAX_HEADER or length > size - 8:
                return "garbage" if length > MAX_HEADER else "truncated", \
                    f"its header claims {length} bytes, the file has {size - 8} after the length"
            raw = f.read(length)
    except (OSError, confine.Refused):
        return None  # unreadable (the permission probe's to say) or leading out of the checkpoint
    try:
        header = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return "garbage", f"its {length}-byte JSON header does not parse ({type(exc).__name__})"
    if not isinstance(header, dict):
        return "garbage", "its header is not a JSON object"
    ends = [t.get("data_offsets", [0, 0])[1] for k, t in header.items()
            if k != "__metadata__" and isinstance(t, dict) and isinstance(t.get("data_offsets"), list)
            and len(t["data_offsets"]) == 2 and isinstance(t["data_offsets"][1], int)]
    data = size - 8 - length
    if ends and max(ends) > data:
        return "truncated", f"its tensors end at byte {max(ends)} of the data, which holds {data}"
    return None
