"""torch's legacy (non-zip, before torch 1.6) `.pt`, read without executing it: what the trust gate runs
on a file zipcheck calls legacy, before anything loads it for real.

torch.serialization._legacy_load unpickles five pickles, each with the full pickle module (weights_only=False
is what DeepSpeed loads with): the magic number, the protocol version, sys_info, the object graph (its
storages as persistent ids), the storage keys; then it reads the raw storage bytes. A payload in any one of
them runs, so each is walked here by safe_pickle's restricted reader and held to the shape torch expects.
Before all that, torch tries the file as a tar archive (its oldest format) and unpickles that archive's
members: a file whose first block is a tar header is not followed.
"""

from __future__ import annotations

import io
import pickle
import tarfile

from triage.probe.confine import open_regular
from triage.probe.pickle_bounds import OverCap, check_graph, prescan, quiet_string_escapes, shown
from triage.probe.safe_pickle import MAX_PICKLE_BYTES, UNREADABLE, ShardMeta, _over_cap, _read, _RestrictedUnpickler

LEGACY_MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001


def read_legacy_shard(path: str) -> ShardMeta:
    """read_shard for torch's legacy format: each of its five pickles walked by the restricted reader with a
    fresh unpickler, as torch uses, and held to the shape torch expects of it; the storage bytes are never
    read. ShardMeta.suspicious when any pickle names a global outside the allow-list (torch unpickles the
    storage keys as freely as the object); .error when the file is not a legacy .pt followed in full (a
    pickle cut short, a value of another shape, a file torch would open as a tar archive)."""
    meta = ShardMeta(path=str(path))
    readers: list[_RestrictedUnpickler] = []
    values: list = []
    try:
        with open_regular(path) as f:  # never a FIFO or device
            head = io.BytesIO(f.read(MAX_PICKLE_BYTES + 1))  # the pickles come first, the storages after
        if _is_tar(head.getvalue()[:512]):
            raise pickle.UnpicklingError("the file is also a tar archive, which torch.load opens first and whose "
                                         "member pickles it loads: not followed here")
        for what, shape, expected in LEGACY_PICKLES:
            readers.append(_RestrictedUnpickler(head))
            start = head.tell()
            prescan(head)  # within the caps before it is followed
            head.seek(start)
            with quiet_string_escapes():
                values.append(readers[-1].load())
            check_graph(values[-1])
            if readers[-1].suspicious:
                break  # what it names is the finding
            if not expected(values[-1], readers[3].storages if len(readers) > 3 else {}):
                raise pickle.UnpicklingError(f"legacy format: {what} is not {shape} "
                                             f"({shown(values[-1], 60)})")
    except OverCap as exc:
        return _over_cap(meta, exc)
    except UNREADABLE as exc:
        meta.error = f"{type(exc).__name__}: {exc}"[:300]
        return meta
    if len(values) == len(LEGACY_PICKLES):
        _read(meta, readers[3], values[3])
    meta.suspicious = [name if what == "the object" else f"{name} (in {what})"
                       for (what, _, _), reader in zip(LEGACY_PICKLES, readers) for name in reader.suspicious]
    meta.globals_seen = sorted({f"{m}.{n}" for reader in readers for m, n in reader.globals_seen})
    return meta


# (what, the shape torch expects, the check): the storage keys must name storages of the object.
LEGACY_PICKLES = (
    ("the magic number", f"{LEGACY_MAGIC_NUMBER:#x}", lambda v, _: type(v) is int and v == LEGACY_MAGIC_NUMBER),
    ("the protocol version", str(LEGACY_PROTOCOL), lambda v, _: type(v) is int and v == LEGACY_PROTOCOL),
    ("sys_info", "a dict", lambda v, _: type(v) is dict),
    ("the object", "", lambda v, _: True),
    ("the storage keys", "a list of the object's storage keys (str)",
     lambda v, storages: type(v) is list and all(type(k) is str and k in storages for k in v)),
)


def _is_tar(block: bytes) -> bool:
    """Would torch's legacy_load take the file for a tar archive? tarfile accepts its first 512-byte header."""
    try:
        tarfile.TarInfo.frombuf(block, tarfile.ENCODING, "surrogateescape")
    except tarfile.HeaderError:
        return False
    return True
