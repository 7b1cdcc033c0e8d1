"""Shard metadata built to exhaust the safe reader's memory or time, or to change how it reads
other shards: each builder edits the `data.pkl` inside a REAL DeepSpeed shard (a copy of a
baseline, tests/probe_checkpoints.py), keeping every other record of the zip as it was.

The edit adds one key to the shard's top-level dict: the real pickle ends with the dict on the
stack and STOP, so `<key> <value> SETITEM STOP` in place of that STOP is still the same
checkpoint, with one hostile value in it. The values are raw opcode streams (pickletools names).
"""

from __future__ import annotations

import os
import pickletools
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


def _dag(levels: int, fanout: int, empty: bytes, fill: bytes) -> bytes:
    """A leaf, then `levels` containers each holding the one below `fanout` times: shared references (memo
    GETs, five bytes each) in the file, fanout ** levels nodes to whatever expands it."""
    slot = struct.pack("<I", HIGH_MEMO)
    out = b"K\x01r" + slot  # the leaf, 1, memoized
    for _ in range(levels):
        out += b"0" + empty + b"(" + (b"j" + slot) * fanout + fill + b"r" + slot  # POP the level below, build on it
    return out


def tuple_dag(levels: int = 6, fanout: int = 100) -> bytes:
    """(((1, 1, ...), ...), ...): immutable, so hashable; hash() of it visits fanout ** levels nodes."""
    return _dag(levels, fanout, b"", b"t")  # MARK, GETs, TUPLE


def list_dag(levels: int = 6, fanout: int = 100) -> bytes:
    """[[[1, 1, ...], ...], ...]: str() of it writes fanout ** levels elements."""
    return _dag(levels, fanout, b"]", b"e")  # EMPTY_LIST, MARK, GETs, APPENDS


def dag_key(levels: int = 6, fanout: int = 100) -> bytes:
    """{tuple_dag: 1}: SETITEM hashes the key while the pickle is loaded."""
    return b"}" + tuple_dag(levels, fanout) + b"K\x01s"


def repeated_key(count: int = 10_000, levels: int = 3, fanout: int = 100) -> bytes:
    """`count` dicts {T: 1}, each dropped once built, with one tuple_dag T of fanout ** levels nodes (under
    the cap on one object) as their key: every SETITEM hashes all of T again. The value left is None."""
    slot = struct.pack("<I", HIGH_MEMO + 64)
    return tuple_dag(levels, fanout) + b"r" + slot + b"0" + (b"}j" + slot + b"K\x01s0") * count + b"N"


def colliding_keys(count: int = 60_000, pairs: bool = False) -> bytes:
    """{k * (2**61 - 1) + 5: 1 for k in 1..count}: distinct integer keys of one hash (5), so each insertion
    compares with every key before it, count**2 / 2 comparisons (60,000 keys: 1.8 * 10^9). pairs: the same
    keys as OrderedDict([(key, 1), ...]), a call that inserts them itself."""
    keys = [small_int(k * (2 ** 61 - 1) + 5) for k in range(1, count + 1)]
    if pairs:
        return b"ccollections\nOrderedDict\n((" + b"".join(k + b"K\x01\x86" for k in keys) + b"ltR"
    return b"}(" + b"".join(k + b"K\x01" for k in keys) + b"u"


def late_list_dag(levels: int = 6, fanout: int = 100) -> bytes:
    """list_dag built top down: `levels + 1` empty lists first, each then filled with `fanout` references to
    the next while that one is still empty. Counted as it is built, it is small; loaded, it is the same
    fanout ** levels nodes."""
    slots = [struct.pack("<I", HIGH_MEMO + i) for i in range(levels + 1)]
    out = b"".join(b"]r" + slot + b"0" for slot in slots)  # EMPTY_LIST, memoize, POP
    for upper, lower in zip(slots, slots[1:]):
        out += b"j" + upper + b"(" + (b"j" + lower) * fanout + b"e0"  # GET, MARK, GETs, APPENDS, POP
    return out + b"j" + slots[-1] + b"K\x01a0j" + slots[0]  # a leaf in the last, then the first as the value


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


# ---------------------------------------------------------------- whole files

def legacy_pickle_ends(data: bytes) -> list[int]:
    """Where each of a legacy .pt's five pickles ends (magic number, protocol, sys_info, object, storage keys)."""
    ends = [0]
    for _ in range(5):
        ends.append(ends[-1] + 1 + next(pos for op, _, pos in pickletools.genops(data[ends[-1]:]) if op.name == "STOP"))
    return ends[1:]


def splice_storage_keys(shard: Path, pickle_bytes: bytes) -> Path:
    """A legacy-format shard (payloads.legacy_clean) whose storage keys pickle is replaced by `pickle_bytes`:
    the four pickles before it and the storage bytes after it as torch wrote them."""
    data = Path(shard).read_bytes()
    ends = legacy_pickle_ends(data)
    Path(shard).write_bytes(data[:ends[3]] + pickle_bytes + data[ends[4]:])
    return Path(shard)


def tar_polyglot(shard: Path, payload: bytes) -> Path:
    """A legacy-format shard (payloads.legacy_clean) whose sys_info pickle, a dict as torch writes it, holds
    one bytes value laid out so that the file's first bytes are also a tar archive: a first member named by
    the bytes before it, then a member `storages` holding `payload`. torch's _legacy_load tries a file as
    a tar archive (torch's oldest format) before anything else and unpickles that member; the five
    pickles of the legacy stream stay clean, and their storage bytes follow as torch wrote them."""
    data = Path(shard).read_bytes()
    ends = legacy_pickle_ends(data)
    prefix = data[:ends[1]] + b"\x80\x02}" + text("pad") + b"B"  # magic, protocol; sys_info = {"pad": BINBYTES
    member = payload.ljust(-(-len(payload) // 512) * 512, b"\0")
    size = 512 + 512 + len(member) + 1024 - len(prefix) - 4  # the value's: the archive after its own length
    archive = _tar_header(prefix + struct.pack("<I", size), 0) + _tar_header(b"storages", len(payload)) + member
    archive += bytes(1024)  # the end of the archive
    sys_info = archive + b"s."
    Path(shard).write_bytes(sys_info + data[ends[2]:])
    return Path(shard)


def _tar_header(name: bytes, size: int) -> bytes:
    """A ustar header of a regular file: `name` (the first 100 bytes), `size`, and the checksum over it."""
    fields = b"0000644\0" + b"0000000\0" * 2 + b"%011o\0" % size + b"00000000000\0" + b" " * 8 + b"0"
    header = bytearray(name.ljust(100, b"\0") + fields + bytes(100) + b"ustar\x0000").ljust(512, b"\0")
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header)


def sparse_record(shard: Path, declared: int = 100 * 10 ** 9) -> Path:
    """The real shard with its largest storage record declared `declared` bytes long, stored: the record's
    bytes are a hole of that size (a sparse file: the disk holds what it did, the file's size is
    `declared` more), so the record lies inside the file and only its size gives it away."""
    shard = Path(shard)
    tmp = shard.with_name(shard.name + ".hostile")
    with zipfile.ZipFile(shard) as src:
        infos = src.infolist()
        big = max((i for i in infos if "/data/" in i.filename), key=lambda i: i.file_size)
        records = [(i.filename, src.read(i)) for i in infos if i is not big]
    with open(tmp, "wb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as dst:
        for name, data in records:
            dst.writestr(name, data)
        info = zipfile.ZipInfo(big.filename, date_time=big.date_time)
        info.file_size = info.compress_size = declared
        info.CRC = big.CRC  # never checked: nothing may read that far
        info.header_offset = f.tell()
        f.write(info.FileHeader(zip64=True))
        f.seek(declared, os.SEEK_CUR)  # the hole
        dst.filelist.append(info)
        dst.NameToInfo[info.filename] = info
        dst.start_dir = f.tell()  # the central directory (zip64) is written after the hole
    os.replace(tmp, shard)
    return shard


# ---------------------------------------------------------------- fuzz strategies (hypothesis)
# Used by tests/test_fuzz_safe_reader.py (a bounded example count) and by
# benchmarks/fuzz_safe_reader.py (a long run); imported lazily so the builders need no hypothesis.

FUZZ_GLOBALS = [  # admitted stand-ins, and globals whose call would run code
    "torch\nFloatStorage", "torch._utils\n_rebuild_tensor_v2", "collections\nOrderedDict", "builtins\nset",
    "torch._tensor\n_rebuild_from_type_v2", "builtins\ngetattr", "deepspeed.runtime.zero.config\nZeroStageEnum",
    "argparse\nNamespace", "_codecs\nencode", "torch\ndevice", "builtins\nexec", "posix\nsystem", "os\nsystem",
    "builtins\neval", "subprocess\nPopen", "builtins\n__import__", "copy_reg\n_reconstructor",
]


def opcode_streams(marker: str):
    """Sequences of pickle opcodes with arguments, valid and invalid: some lengths lie, some
    globals would run `touch <marker>` if anything called them."""
    import pickletools

    from hypothesis import strategies as st

    ops = list(pickletools.opcodes)
    command = f"touch {marker}"

    @st.composite
    def one(draw):
        op = draw(st.sampled_from(ops))
        arg = op.arg
        if arg is None:
            return op.code.encode("latin-1")
        if op.name in ("GLOBAL", "INST"):
            body = (draw(st.sampled_from(FUZZ_GLOBALS)) + "\n").encode()
        elif arg.n > 0:
            body = draw(st.binary(min_size=arg.n, max_size=arg.n))
        elif arg.n == pickletools.UP_TO_NEWLINE:
            line = draw(st.one_of(st.sampled_from(["0", "1", "-7", "'x'", repr(command), "S'a'", "99999999"]),
                                  st.text(st.characters(codec="ascii", exclude_characters="\n"), max_size=12)))
            body = line.encode() + b"\n"
        else:
            payload = draw(st.one_of(st.just(command.encode()), st.binary(max_size=24)))
            size = draw(st.one_of(st.just(len(payload)), st.integers(0, 2 ** 31 - 1)))  # sometimes a lie
            width = {pickletools.TAKEN_FROM_ARGUMENT1: ("<B", 255),
                     pickletools.TAKEN_FROM_ARGUMENT4: ("<i", 2 ** 31 - 1),
                     pickletools.TAKEN_FROM_ARGUMENT4U: ("<I", 2 ** 32 - 1),
                     pickletools.TAKEN_FROM_ARGUMENT8U: ("<Q", 2 ** 64 - 1)}[arg.n]
            body = struct.pack(width[0], min(size, width[1])) + payload
        return op.code.encode("latin-1") + body

    generated = st.lists(one(), max_size=60).map(lambda parts: b"\x80\x02" + b"".join(parts) + b".")
    return st.one_of(generated, valid_pickles())


def valid_pickles():
    """Well-formed pickles (protocols 0-5) of nested plain data: the streams the reader must read."""
    import pickle

    from hypothesis import strategies as st

    leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8),
                       st.binary(max_size=8))
    values = st.recursive(leaves, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4),
        st.tuples(inner, inner), st.frozensets(st.integers(), max_size=3)), max_leaves=20)
    return st.tuples(values, st.integers(0, pickle.HIGHEST_PROTOCOL)).map(lambda v: pickle.dumps(*v))


def mutated(real: list[bytes]):
    """Real shards' pickles with bytes flipped, inserted, deleted, or cut short."""
    from hypothesis import strategies as st

    @st.composite
    def edit(draw):
        data = bytearray(draw(st.sampled_from(real)))
        for _ in range(draw(st.integers(1, 6))):
            at = draw(st.integers(0, len(data)))
            kind = draw(st.sampled_from(["flip", "insert", "delete", "cut"]))
            if kind == "flip" and at < len(data):
                data[at] = draw(st.integers(0, 255))
            elif kind == "insert":
                data[at:at] = draw(st.binary(min_size=1, max_size=8))
            elif kind == "delete":
                del data[at:at + draw(st.integers(1, 8))]
            elif kind == "cut":
                del data[at:]
        return bytes(data)

    return edit()


def dag_shaped(real: list[bytes]):
    """(pickle, nodes): a real shard's pickle with one shared-reference structure added under a top-level key
    (add_key's edit): a tuple or list DAG, built bottom up or filled after it was shared, as the value or as
    a dict key, of random depth and fan-out, some far over the caps; `nodes` is what it expands to (the
    leaves of its last level)."""
    from hypothesis import strategies as st

    @st.composite
    def edit(draw):
        data = draw(st.sampled_from(real))
        key = draw(st.sampled_from(["ds_version", "client", "ds_config", "module", "optimizer"]))
        build = draw(st.sampled_from([tuple_dag, list_dag, late_list_dag, dag_key]))
        levels, fanout = draw(st.integers(1, 8)), draw(st.integers(1, 120))
        return data[:-1] + text(key) + build(levels, fanout) + b"s.", fanout ** levels

    return edit()


def log_texts():
    """Arbitrary unicode, and log-like text assembled from traceback and launcher fragments."""
    from hypothesis import strategies as st

    fragments = st.sampled_from([
        "Traceback (most recent call last):", '  File "/opt/ds/engine.py", line 2710, in load_checkpoint',
        "    raise RuntimeError(msg)", "RuntimeError: Error(s) in loading state_dict for Model:",
        "\tsize mismatch for w: copying a param with shape torch.Size([1x]) from checkpoint",
        "[rank3]: ", "[default0]:", "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        "The above exception was the direct cause of the following exception:", "  exitcode  : -9",
        "AssertionError", "deepspeed 0.19.8", "ZeRO stage 3", "KeyError: 'module'", "\x1b[31m", "...",
        "During handling of the above exception, another exception occurred:", "rank  : 1 (local_rank: 1)",
    ])
    separators = st.sampled_from(["\n", "\r\n", "\r", "", " ", "\x00", "\u2028", "\n\n"])
    assembled = st.lists(st.tuples(st.one_of(fragments, st.text(max_size=30)), separators), max_size=40).map(
        lambda parts: "".join(f + s for f, s in parts))
    return st.one_of(st.text(max_size=400), assembled)
