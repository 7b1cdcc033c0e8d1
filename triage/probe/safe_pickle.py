"""Read a DeepSpeed shard's metadata without executing its pickle and without its tensor bytes.

A `.pt` file written by `torch.save` is a zip archive: `<prefix>/data.pkl` (the object graph),
`<prefix>/data/<key>` (one raw record per tensor storage) and a few small records. This module
reads only the central directory and `data.pkl`, and walks the pickle with a restricted
unpickler:

* only the globals a DeepSpeed checkpoint needs are admitted, each mapped to an inert stand-in
  defined here (nothing is imported, nothing from the file is called);
* a tensor becomes a `TensorMeta` (shape, dtype, storage key, offset), its storage is never read;
* any other global is recorded in `ShardMeta.suspicious` and replaced by an inert placeholder
  that records its arguments: a crafted shard whose pickle would run code is reported, never run;
* the stream is checked against caps first (pickle_bounds: opcodes, containers, depth, memo,
  integer and string sizes, and the logical size of what it builds and hashes, shared references
  counted each time they are used) and the loaded graph for cycles and that logical size, so a
  crafted `data.pkl` cannot exhaust memory or time; what a report shows of a value is cut short
  (pickle_bounds.shown); each file gets its own stand-ins, so one cannot change another's reading.

Cost: the central directory plus `data.pkl` (kilobytes for a DeepSpeed shard), independent of
how large the tensors are. stdlib only: no torch, no deepspeed.
"""

from __future__ import annotations

import _compat_pickle
import io
import pickle
import types
import zipfile
from collections import OrderedDict
from dataclasses import dataclass, field

from triage.probe import zipcheck
from triage.probe.confine import open_regular
from triage.probe import hash_keys
from triage.probe.pickle_bounds import (MAX_PROBES, PROBES, OverCap, check_graph, prescan, quiet_string_escapes,
                                        shown)

MAX_PICKLE_BYTES = 64 * 1024 * 1024  # data.pkl of a huge ZeRO-3 model is a few megabytes, not this

# torch's legacy typed-storage class names (what the persistent ids name) -> dtype.
STORAGE_DTYPES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
    "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
    "ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128",
    "UntypedStorage": "uint8", "QInt8Storage": "qint8", "QUInt8Storage": "quint8",
    "QInt32Storage": "qint32", "QUInt4x2Storage": "quint4x2", "QUInt2x4Storage": "quint2x4",
}
ITEM_SIZE = {
    "float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
    "int8": 1, "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16, "qint8": 1, "quint8": 1,
    "qint32": 4, "quint4x2": 1, "quint2x4": 1,
}
DTYPE_NAMES = {
    "float32", "float", "float64", "double", "float16", "half", "bfloat16", "int64", "long", "int32",
    "int", "int16", "short", "int8", "uint8", "bool", "complex64", "complex128", "cfloat", "cdouble",
    "float8_e4m3fn", "float8_e5m2",
}


# ---------------------------------------------------------------- inert stand-ins

@dataclass(frozen=True)
class StorageMeta:
    dtype: str
    key: str
    location: str
    numel: int

    @property
    def nbytes(self) -> int:
        return self.numel * ITEM_SIZE.get(self.dtype, 1)


@dataclass(frozen=True)
class TensorMeta:
    """A tensor as the pickle describes it; its bytes stay in the zip record `data/<key>`
    (triage/probe/tensor_data.py reads them)."""
    shape: tuple
    dtype: str
    storage_key: str | None
    offset: int = 0
    stride: tuple | None = None

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d if isinstance(d, int) else 1
        return n

    def __repr__(self) -> str:
        return f"tensor({shown(list(self.shape))}, {self.dtype}, storage {self.storage_key})"


class Record:
    """An admitted (DeepSpeed, argparse, numpy) object: its class name and saved state, no code."""

    qualname = "record"

    def __new__(cls, *args, **kwargs):
        obj = object.__new__(cls)
        obj.args = args
        obj.state = None
        return obj

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        self.state = state

    def __reduce__(self):  # never re-pickled, but keep copy/deepcopy from touching the original class
        raise TypeError("a ds-triage record cannot be pickled")

    def get(self, key, default=None):
        state = self.state[-1] if isinstance(self.state, tuple) and self.state else self.state
        return state.get(key, default) if isinstance(state, dict) else default

    def __repr__(self) -> str:
        return f"<{self.qualname}>"


class Placeholder(Record):
    """A global outside the allow-list: recorded, never imported, never called."""

    qualname = "suspicious"


def _record_class(qualname: str, base: type = Record) -> type:
    return type(qualname.rsplit(".", 1)[-1], (base,), {"qualname": qualname})


class ZeroStage(int):
    """deepspeed.runtime.zero.config.ZeroStageEnum(n) -> n."""

    def __new__(cls, value=0, *args):
        return int.__new__(cls, value if isinstance(value, int) else 0)

    def __setstate__(self, state):
        pass


# Python before 3.11.5 (and 3.12.0) pickles an enum member as getattr(EnumClass, "name"), so a
# DeepSpeed shard written there holds `builtins.getattr` applied to ZeroStageEnum. Only that
# pattern is admitted: the class must be an admitted enum stand-in and the name one of its members.
ENUM_MEMBERS: dict[type, dict[str, int]] = {
    ZeroStage: {"disabled": 0, "optimizer_states": 1, "gradients": 2, "weights": 3, "max_stage": 3},
}


class _StorageType:
    def __init__(self, dtype: str):
        self.dtype = dtype


class _TensorType:
    """torch.Tensor / torch.nn.Parameter named as the type of `_rebuild_from_type_v2`."""

    def __init__(self, name: str):
        self.name = name


def _rebuild_tensor_v2(storage, storage_offset=0, size=(), stride=None, *args, **kwargs):
    if isinstance(storage, StorageMeta):
        shape = tuple(size) if isinstance(size, (tuple, list)) else ()
        strides = tuple(stride) if isinstance(stride, (tuple, list)) and all(isinstance(s, int) for s in stride) \
            else None
        return TensorMeta(shape, storage.dtype, storage.key, storage_offset if isinstance(storage_offset, int) else 0,
                          strides if strides is not None and len(strides) == len(shape) else None)
    return TensorMeta(tuple(size) if isinstance(size, (tuple, list)) else (), "unknown", None)


def _rebuild_parameter(data, *args, **kwargs):
    return data


def _rebuild_from_type_v2(func, new_type, args=(), state=None):
    # func is itself a stand-in from this allow-list (or a placeholder): calling it runs nothing.
    return func(*args) if callable(func) else func


def _safe_codecs_encode(obj, encoding="utf-8", errors="strict"):
    if not isinstance(obj, str) or encoding not in ("latin1", "latin-1", "utf-8", "utf8", "ascii"):
        raise pickle.UnpicklingError("unsupported _codecs.encode call")
    return obj.encode(encoding, errors)


class _Keyed:
    """OrderedDict, dict, set or frozenset as a pickle calls it (REDUCE): the comparisons inserting the keys
    it is given costs (hash_keys.collisions) are counted, with all of the file's calls, before the real one
    inserts them. Its state cannot be set (BUILD), so a pickle cannot reset the count."""

    __slots__ = ("build", "pairs", "spent")

    def __init__(self, build: type, pairs: bool, spent: list[int] | None = None):
        for name, value in (("build", build), ("pairs", pairs), ("spent", spent)):
            object.__setattr__(self, name, value)

    def bound(self, spent: list[int]) -> "_Keyed":
        """This stand-in for one file, counting into its `spent`."""
        return _Keyed(self.build, self.pairs, spent)

    def __call__(self, items=(), *args, **kwargs):
        if not isinstance(items, dict):
            items = list(items)
        self.spent[0] += hash_keys.collisions(items if isinstance(items, dict) or not self.pairs
                                              else [item[0] for item in items])
        if self.spent[0] > MAX_PROBES:
            raise OverCap(PROBES)
        return self.build(items, *args, **kwargs)

    def __setattr__(self, name, value):
        raise pickle.UnpicklingError("a stand-in's state cannot be set")

    def __setstate__(self, state):
        raise pickle.UnpicklingError("a stand-in's state cannot be set")


def _device(*args):
    # str() of anything else could recurse through a crafted structure
    return "device(" + ", ".join(str(a) if isinstance(a, (str, int)) else "?" for a in args) + ")"


def _allowed() -> dict[tuple[str, str], object]:
    allowed: dict[tuple[str, str], object] = {
        ("collections", "OrderedDict"): _Keyed(OrderedDict, pairs=True),
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
        ("torch._utils", "_rebuild_tensor"): _rebuild_tensor_v2,
        ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
        ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
        ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type_v2,
        ("torch._tensor", "_rebuild_from_type"): _rebuild_from_type_v2,
        ("torch", "Tensor"): _TensorType("torch.Tensor"),
        ("torch.nn.parameter", "Parameter"): _TensorType("torch.nn.Parameter"),
        ("torch", "Size"): tuple,
        ("torch", "device"): _device,
        ("_codecs", "encode"): _safe_codecs_encode,
        ("deepspeed.runtime.zero.config", "ZeroStageEnum"): ZeroStage,
    }
    for name, dtype in STORAGE_DTYPES.items():
        allowed[("torch", name)] = _StorageType(dtype)
    allowed[("torch.storage", "UntypedStorage")] = _StorageType("uint8")
    for name in DTYPE_NAMES:
        allowed[("torch", name)] = f"torch.{name}"
    for builtins in ("builtins", "__builtin__"):
        for name, obj in (("set", _Keyed(set, False)), ("frozenset", _Keyed(frozenset, False)), ("list", list),
                          ("tuple", tuple), ("dict", _Keyed(dict, True)), ("complex", complex), ("slice", slice)):
            allowed[(builtins, name)] = obj  # not bytearray/range: bytearray(10**12) would allocate
    # Objects DeepSpeed (or Megatron's client state) pickles: kept as inert records.
    for qualname in ("deepspeed.runtime.fp16.loss_scaler.LossScaler",
                     "deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler",
                     "deepspeed.utils.tensor_fragment.fragment_address",
                     "argparse.Namespace",
                     "numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct",
                     "numpy.ndarray", "numpy.dtype", "numpy.core.multiarray.scalar",
                     "numpy._core.multiarray.scalar"):
        module, name = qualname.rsplit(".", 1)
        allowed[(module, name)] = _record_class(qualname)
    return allowed


def _fresh(value):
    """A private copy of a stand-in: BUILD in one file's pickle can set attributes on what
    find_class returned (a function's __defaults__, a storage type's dtype); with a copy per
    file that never reaches another shard. Builtin types and strings cannot be changed."""
    if isinstance(value, types.FunctionType):
        copy = types.FunctionType(value.__code__, value.__globals__, value.__name__, value.__defaults__,
                                  value.__closure__)
        copy.__kwdefaults__ = dict(value.__kwdefaults__) if value.__kwdefaults__ else None
        return copy
    if isinstance(value, (_StorageType, _TensorType)):
        return type(value)(*vars(value).values())
    if isinstance(value, type) and issubclass(value, Record):
        return _record_class(value.qualname)
    return value


ALLOWED = _allowed()
# What torch.load(weights_only=True) refuses among the admitted globals: DeepSpeed's own classes.
NOT_WEIGHTS_ONLY = {k for k in ALLOWED if k[0].startswith(("deepspeed.", "argparse", "numpy"))}


class _RestrictedUnpickler(pickle.Unpickler):
    def __init__(self, data):  # bytes, or a binary file (a legacy .pt is read pickle by pickle)
        super().__init__(data if hasattr(data, "read") else io.BytesIO(data))
        self.globals_seen: set[tuple[str, str]] = set()
        self.suspicious: list[str] = []
        self.storages: dict[str, StorageMeta] = {}
        self.allowed: dict[tuple[str, str], object] = {}  # this file's own stand-ins (see _fresh)
        self.keyed = [0]  # comparisons its calls of dict, set... cost (_Keyed)

    def find_class(self, module: str, name: str):  # never imports: a lookup in ALLOWED only
        # Python 2 names (protocol < 3 pickles: `__builtin__`, `copy_reg`) as pickle itself maps them.
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        key = (module, name)
        self.globals_seen.add(key)
        if key in ALLOWED:
            if key not in self.allowed:
                value = ALLOWED[key]
                self.allowed[key] = value.bound(self.keyed) if isinstance(value, _Keyed) else _fresh(value)
            return self.allowed[key]
        if key in (("builtins", "getattr"), ("__builtin__", "getattr")):
            return self._enum_member
        qualname = f"{module}.{name}"
        if qualname not in self.suspicious:
            self.suspicious.append(qualname)
        return _record_class(qualname, Placeholder)

    def _enum_member(self, cls, name, *default):
        """getattr(cls, name) as an enum member's pickle uses it; anything else is suspicious."""
        members = ENUM_MEMBERS.get(cls) if isinstance(cls, type) else None
        if members is not None and isinstance(name, str) and name in members and not default:
            return cls(members[name])
        what = f"builtins.getattr({getattr(cls, 'qualname', type(cls).__name__)}, {shown(name)})"
        if what not in self.suspicious:
            self.suspicious.append(what)
        return Placeholder()

    def persistent_load(self, pid):
        if isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage":
            storage_type, key, location, numel = pid[1], pid[2], pid[3], pid[4]
            dtype = storage_type.dtype if isinstance(storage_type, _StorageType) else "unknown"
            storage = StorageMeta(dtype, _text(key), _text(location), numel if isinstance(numel, int) else 0)
            self.storages.setdefault(storage.key, storage)
            return storage
        raise pickle.UnpicklingError(f"unsupported persistent id {shown(pid)}")


# ---------------------------------------------------------------- the metadata

@dataclass
class ShardMeta:
    """What a shard's pickle says, tensors as TensorMeta. error set when it could not be read."""
    path: str
    error: str | None = None
    suspicious: list[str] = field(default_factory=list)
    globals_seen: list[str] = field(default_factory=list)
    top_keys: list[str] = field(default_factory=list)
    ds_version: object = None
    ds_config: dict | None = None
    dp_world_size: int | None = None
    mp_world_size: int | None = None
    parallel_dimensions: dict | None = None
    param_shapes: dict[str, tuple] | None = None
    zero_stage: int | None = None
    partition_count: object = None
    module_keys: list[str] | None = None
    module_shapes: dict[str, tuple] | None = None  # the module state's tensors (ZeRO-3: params are empty)
    frozen_param_shapes: dict[str, tuple] | None = None
    param_shape_groups: int | None = None  # param_shapes is saved as one dict per optimizer param group
    param_group_shapes: list[dict[str, tuple]] | None = None  # the same, group by group, in saved order
    optimizer: dict | None = None  # the torch optimizer's state inside (see optimizer_summary)
    optimizer_keys: list[str] | None = None
    global_steps: int | None = None
    optim_ds_version: object = None  # ds_version inside optimizer_state_dict (what ZeRO-1/2 and bf16 check)
    storages: dict[str, StorageMeta] = field(default_factory=dict)
    prefix: str = ""
    over_cap: str | None = None  # which cap (pickle_bounds) the pickle went over; error is set too
    graph: object = field(default=None, repr=False)  # the loaded object graph itself (inert stand-ins only)

    @property
    def weights_only_refused(self) -> list[str]:
        """Admitted globals that torch.load(weights_only=True) would still refuse."""
        return sorted(g for g in self.globals_seen if tuple(g.rsplit(".", 1)) in NOT_WEIGHTS_ONLY)

    def to_json(self) -> dict:
        return {
            "path": self.path, "error": self.error, "suspicious": self.suspicious,
            "ds_version": self.ds_version if isinstance(self.ds_version, (str, type(None))) else shown(self.ds_version),
            "dp_world_size": self.dp_world_size, "mp_world_size": self.mp_world_size,
            "zero_stage": self.zero_stage, "partition_count": _plain(self.partition_count),
            "param_count": None if self.param_shapes is None else len(self.param_shapes),
        }


def _text(value) -> str:
    """A name (a dict key, a storage key) as text: itself if a str, else its repr cut short."""
    return value if isinstance(value, str) else shown(value)


def _plain(value):
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return int(value) if isinstance(value, int) else value


def pickle_record(zf: zipfile.ZipFile) -> str:
    """The name of the archive's `*/data.pkl` (torch writes `<prefix>/data.pkl`)."""
    for name in zf.namelist():
        if name == "data.pkl" or (name.endswith("/data.pkl") and name.count("/") == 1):
            return name
    raise pickle.UnpicklingError("no data.pkl record: not a torch.save archive")


def read_pickle(zf: zipfile.ZipFile) -> tuple[object, _RestrictedUnpickler]:
    name = pickle_record(zf)
    info = zf.getinfo(name)
    if info.file_size > MAX_PICKLE_BYTES:
        raise pickle.UnpicklingError(f"data.pkl is {info.file_size} bytes, more than the {MAX_PICKLE_BYTES} read")
    problem = zipcheck.declared(info)  # read_shard's open_zip checked them all; a caller's own ZipFile did not
    if problem:
        raise zipcheck.DeclaredOverCap(problem)
    with zf.open(info) as f:
        data = f.read(MAX_PICKLE_BYTES + 1)
    prescan(data)
    unpickler = _RestrictedUnpickler(data)
    with quiet_string_escapes():
        obj = unpickler.load()
    check_graph(obj)
    return obj, unpickler


def read_shard(path: str) -> ShardMeta:
    """The shard's metadata; never raises for a bad file (ShardMeta.error says what is wrong)."""
    meta = ShardMeta(path=str(path))
    try:
        with open_regular(path) as f, zipcheck.open_zip(f) as zf:  # never a FIFO or device
            meta.prefix = pickle_record(zf).rpartition("/")[0]
            obj, unpickler = read_pickle(zf)
    except OverCap as exc:
        return _over_cap(meta, exc)
    except UNREADABLE as exc:
        meta.error = f"{type(exc).__name__}: {exc}"[:300]
        return meta
    return _read(meta, unpickler, obj)


# What a damaged or hostile file can raise while it is followed: reported, never raised.
UNREADABLE = (OSError, zipfile.BadZipFile, pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError,
              IndexError, AttributeError, MemoryError, RecursionError, NotImplementedError, OverflowError,
              UnicodeDecodeError)


def _read(meta: ShardMeta, unpickler: "_RestrictedUnpickler", obj) -> ShardMeta:
    meta.suspicious = list(unpickler.suspicious)
    meta.globals_seen = sorted(f"{m}.{n}" for m, n in unpickler.globals_seen)
    meta.storages = dict(unpickler.storages)
    meta.graph = obj
    _describe(meta, obj)
    return meta


def _over_cap(meta: ShardMeta, exc: OverCap) -> ShardMeta:
    meta.over_cap = str(exc)
    meta.suspicious = [f"over the safe reader's cap: {exc}"]
    meta.error = f"not read: its pickle goes over the safe reader's cap ({exc})"
    return meta


def _describe(meta: ShardMeta, obj) -> None:
    if not isinstance(obj, dict):
        return
    meta.top_keys = [_text(k) for k in obj]
    meta.ds_version = obj.get("ds_version")
    config = obj.get("ds_config")
    meta.ds_config = config if isinstance(config, dict) else None
    meta.dp_world_size = _int(obj.get("dp_world_size"))
    meta.mp_world_size = _int(obj.get("mp_world_size"))
    meta.global_steps = _int(obj.get("global_steps"))
    dims = obj.get("checkpoint_parallel_dimensions")
    meta.parallel_dimensions = dict(dims) if isinstance(dims, dict) else None
    shapes = obj.get("param_shapes")
    if isinstance(shapes, dict):
        shapes = [shapes]
    if isinstance(shapes, list):
        meta.param_shapes = {}
        meta.param_group_shapes = []
        meta.param_shape_groups = len(shapes)
        for group in shapes:
            if isinstance(group, dict):
                group_shapes = {_text(k): tuple(v) if isinstance(v, (tuple, list)) else v for k, v in group.items()}
                meta.param_shapes.update(group_shapes)
                meta.param_group_shapes.append(group_shapes)
    frozen = obj.get("frozen_param_shapes")
    if isinstance(frozen, dict):
        meta.frozen_param_shapes = {_text(k): tuple(v) for k, v in frozen.items() if isinstance(v, (tuple, list))}
    module = obj.get("module")
    if isinstance(module, dict):
        meta.module_keys = [_text(k) for k in module]
        meta.module_shapes = tensor_shapes(module)
    optim = obj.get("optimizer_state_dict", obj.get("optimizer"))
    if isinstance(optim, dict):
        meta.optimizer = optimizer_summary(optim)
        meta.optimizer_keys = [_text(k) for k in optim]
        stage = optim.get("zero_stage")
        meta.zero_stage = int(stage) if isinstance(stage, int) else None
        meta.partition_count = optim.get("partition_count")
        meta.optim_ds_version = optim.get("ds_version")
        if meta.ds_version is None:
            meta.ds_version = meta.optim_ds_version


def _int(value) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def tensor_shapes(state: dict) -> dict[str, tuple]:
    """name -> shape of the TensorMeta values of a state dict (other values skipped)."""
    return {_text(k): tuple(v.shape) for k, v in state.items() if isinstance(v, TensorMeta)}


def optimizer_summary(optim: dict) -> dict | None:
    """The torch optimizer state inside a DeepSpeed optimizer state (ZeRO-1/2 and bf16:
    `base_optimizer_state`, ZeRO-3: `optimizer_state_dict`, no ZeRO: the state dict itself):
    its per-parameter state keys (exp_avg, momentum_buffer, ...), its param groups' hyperparameter
    names and sizes. None when there is no such state."""
    base = optim.get("base_optimizer_state", optim.get("optimizer_state_dict", optim))
    state_keys: set[str] = set()
    group_keys: set[str] = set()
    sizes: list[int | None] = []
    decoupled = None
    if isinstance(base, dict) and isinstance(base.get("param_groups"), list):
        state = base.get("state")
        for value in (state.values() if isinstance(state, dict) else []):
            if isinstance(value, dict):
                state_keys.update(_text(k) for k in value)
        for group in base["param_groups"]:
            if isinstance(group, dict):
                group_keys.update(_text(k) for k in group if k != "params")
                params = group.get("params")
                sizes.append(len(params) if isinstance(params, (list, tuple)) else None)
                if isinstance(group.get("decoupled_weight_decay"), bool):
                    decoupled = group["decoupled_weight_decay"]
            else:
                sizes.append(None)
        source = "base_optimizer_state" if "base_optimizer_state" in optim else \
            "optimizer_state_dict" if "optimizer_state_dict" in optim else "optimizer"
    elif isinstance(base, list) and base and all(isinstance(g, dict) for g in base):
        # older ZeRO-1/2: one state dict per param group, no param_groups
        for group in base:
            state_keys.update(_text(k) for k in group)
        sizes = [None] * len(base)
        source = "base_optimizer_state (one state per group)"
    else:
        return None
    return {"source": source, "state_keys": sorted(state_keys), "group_keys": sorted(group_keys),
            "param_groups": len(sizes), "group_sizes": sizes, "decoupled_weight_decay": decoupled}


def _jsonable(value, depth: int = 0):
    if depth > 8:
        return "..."
    if isinstance(value, dict):
        return {_text(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, depth + 1) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return shown(value)


def main(argv: list[str] | None = None) -> int:
    """`python -m triage.probe.safe_pickle [--config] SHARD`: a shard's metadata as JSON, safely."""
    import argparse
    import json
    import sys

    parser = argparse.ArgumentParser(prog="python -m triage.probe.safe_pickle",
                                     description="Print a DeepSpeed shard's metadata without running its pickle.")
    parser.add_argument("shard")
    parser.add_argument("--config", action="store_true", help="print only the saved ds_config (sorted JSON)")
    parser.add_argument("--optimizer", action="store_true",
                        help="print only the saved optimizer's state keys and param groups (JSON)")
    args = parser.parse_args(argv)
    try:
        return _print(args)
    except BrokenPipeError:
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _print(args) -> int:
    import sys

    meta = read_shard(args.shard)
    if meta.error:
        print(f"error: {args.shard}: {meta.error}", file=sys.stderr)
        return 3
    show(meta, args)
    return 0


def show(meta: ShardMeta, args) -> None:
    """A shard's metadata as JSON on stdout: all of it, or `args.config` / `args.optimizer` only
    (`ds-triage inspect` and `python -m triage.probe.safe_pickle`)."""
    import json
    import sys

    if args.config:
        json.dump(_jsonable(meta.ds_config), sys.stdout, indent=4, sort_keys=True)
    elif args.optimizer:
        optimizer = (meta.ds_config or {}).get("optimizer") if isinstance(meta.ds_config, dict) else None
        json.dump({"ds_config_optimizer": _jsonable(optimizer), "torch_optim_globals":
                   [g for g in meta.globals_seen if g.startswith("torch.optim.")],
                   "optimizer": meta.optimizer, "param_shape_groups": meta.param_shape_groups},
                  sys.stdout, indent=1)
    else:
        data = meta.to_json()
        data.update(top_keys=meta.top_keys, parallel_dimensions=_jsonable(meta.parallel_dimensions),
                    ds_config=_jsonable(meta.ds_config), optimizer_keys=meta.optimizer_keys,
                    optim_ds_version=_jsonable(meta.optim_ds_version),
                    param_shapes=_jsonable(meta.param_shapes), globals=meta.globals_seen,
                    optimizer=meta.optimizer,
                    weights_only_refused=meta.weights_only_refused)
        json.dump(data, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    raise SystemExit(main())
