"""Shard metadata built to exhaust the safe reader's memory or time, or to change how it reads
other shards: each builder edits the `data.pkl` inside a REAL DeepSpeed shard (a copy of a
baseline, tests/probe_checkpoints.py), keeping every other record of the zip as it was.

The edit adds one key to the shard's top-level dict: the real pickle ends with the dict on the
stack and STOP, so `<key> <value> SETITEM STOP` in place of that STOP is still the same
checkpoint, with one hostile value in it. The values are raw opcode streams (pickletools names).
"""

from __future__ import annotations

import os
import struct
import zipfile
from pathlib import Path

HIGH_MEMO = 900_000  # memo slots the edit uses: far above what the real pickle's own PUTs reach


def text(value: str) -> bytes:
    """BINUNICODE."""
    raw = value.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def empty_sets(count: int) -> bytes:
    """A list of `count` empty sets: one byte (EMPTY_SET) each in the file, ~216 bytes each in memory."""
    return b"(" + b"\x8f" * count + b"l"


def huge_int(nbytes: int) -> bytes:
    """LONG4: an integer `nbytes` long."""
    return b"\x8b" + struct.pack("<i", nbytes) + b"\x7f" * nbytes


def huge_text(nbytes: int) -> bytes:
    return text("a" * nbytes)


def deep_list(depth: int) -> bytes:
    """[[[...]]] nested `depth` deep: EMPTY_LIST x depth, then APPEND x (depth - 1)."""
    return b"]" * depth + b"a" * (depth - 1)


def deep_tuple_key(depth: int) -> bytes:
    """{((...),): 1}: a `depth`-deep tuple as a dict key (hashing it recurses in C)."""
    return b"}" + b"(" * depth + b"t" * depth + b"K\x01s"


def cyclic_dict() -> bytes:
    """A dict that holds itself: {"self": <the same dict>, "train_batch_size": 8}."""
    slot = struct.pack("<I", HIGH_MEMO)
    return b"}r" + slot + text("self") + b"j" + slot + b"s" + text("train_batch_size") + b"K\x08s"


def huge_memo_index() -> bytes:
    """LONG_BINPUT at index 2**32 - 16: the C unpickler grows its memo array to that many slots."""
    return b"Nr" + struct.pack("<I", 2 ** 32 - 16)


def small_int(value: int) -> bytes:
    """LONG1 (any non-negative value under 2**63)."""
    raw = value.to_bytes((value.bit_length() + 8) // 8, "little")
    return b"\x8a" + bytes([len(raw)]) + raw


def restyled_storage_type() -> bytes:
    """torch.FloatStorage, then BUILD {"dtype": "float64"} onto it: admitted globals only, but the
    BUILD sets an attribute on whatever object find_class returned for torch.FloatStorage."""
    return b"ctorch\nFloatStorage\n}" + text("dtype") + text("float64") + b"sb"


def data_pkl_name(zf: zipfile.ZipFile) -> str:
    return next(n for n in zf.namelist() if n.endswith("/data.pkl"))


def rewrite_pickle(shard: Path, data: bytes) -> Path:
    """Replace the shard's data.pkl with `data`; every other record copied as it was."""
    shard = Path(shard)
    tmp = shard.with_name(shard.name + ".hostile")
    with zipfile.ZipFile(shard) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as dst:
        name = data_pkl_name(src)
        for info in src.infolist():
            dst.writestr(info.filename, data if info.filename == name else src.read(info))
    os.replace(tmp, shard)
    return shard


def add_key(shard: Path, key: str, value: bytes) -> Path:
    """The real shard with `key: value` added to its top-level dict (value: an opcode stream)."""
    with zipfile.ZipFile(shard) as zf:
        original = zf.read(data_pkl_name(zf))
    assert original.endswith(b"."), "a torch.save pickle ends with STOP"
    return rewrite_pickle(shard, original[:-1] + text(key) + value + b"s.")
