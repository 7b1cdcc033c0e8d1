"""The parameter names and shapes a model expects (`--model FILE`), read without torch.

FILE is one of:

* a JSON or YAML mapping of names to shapes (`{"head.weight": [8, 128], ...}`; a value may also
  be `{"shape": [...]}`, as `safetensors` headers and some dumps write it);
* a torch state-dict file (`.pt`, `.pth`, `.bin`, a `torch.save` zip): walked with the restricted
  unpickler of safe_pickle, never `torch.load`; tensors become shapes, their bytes are not read.
  A dict holding the state dict under `state_dict`, `model`, `module` or `model_state_dict` is
  unwrapped (reported in `notes`);
* a `.safetensors` file: its header (8-byte little-endian length, then JSON) read with the stdlib.

`python -m triage.probe.model_file FILE` prints `name<TAB>shape` lines, sorted; given a DeepSpeed
model-states shard it prints the saved shapes (param_shapes, else the module's tensors), so that
`diff` of the two is the comparison the model probe makes.
"""

from __future__ import annotations

import json
import os
import pickle
import struct
import zipfile
from dataclasses import dataclass, field

from triage.errors import BadInput
from triage.logs.inputs import json_object
from triage.probe.confine import special
from triage.probe.safe_pickle import ShardMeta, TensorMeta, read_pickle, tensor_shapes

MAX_TEXT_BYTES = 64 * 1024 * 1024
MAX_SAFETENSORS_HEADER = 100 * 1024 * 1024  # the limit safetensors itself enforces
WRAPPERS = ("state_dict", "model_state_dict", "model", "module")


@dataclass
class ModelShapes:
    path: str
    kind: str  # json, yaml, state_dict, safetensors
    shapes: dict[str, tuple]
    notes: list[str] = field(default_factory=list)


def read_model(path: str) -> ModelShapes:
    """The expected names -> shapes; BadInput when the file cannot be used."""
    if not os.path.isfile(path):  # a FIFO or device is refused here, never opened (it could block)
        other = special(path)
        raise BadInput(f"--model {path}: {f'{other}, not a regular file' if other else 'no such file'}")
    lower = path.lower()
    try:
        if lower.endswith(".safetensors"):
            return ModelShapes(path, "safetensors", _safetensors(path))
        if zipfile.is_zipfile(path):
            return _state_dict(path)
        if lower.endswith((".pt", ".pth", ".bin", ".ckpt")):
            raise BadInput(f"--model {path}: not a torch.save zip archive (a legacy, pre-1.6 torch file?): "
                           "give a JSON of names to shapes instead")
        return _mapping(path, "yaml" if lower.endswith((".yaml", ".yml")) else "json")
    except OSError as exc:
        raise BadInput(f"--model {path}: {exc.strerror or exc}") from None


def _safetensors(path: str) -> dict[str, tuple]:
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise BadInput(f"--model {path}: too short for a safetensors file")
        (size,) = struct.unpack("<Q", head)
        if size > MAX_SAFETENSORS_HEADER:
            raise BadInput(f"--model {path}: safetensors header of {size} bytes, more than {MAX_SAFETENSORS_HEADER}")
        data = f.read(size)
    if len(data) < size:
        raise BadInput(f"--model {path}: truncated safetensors header ({len(data)} of {size} bytes)")
    header = json_object(data, f"--model {path}: safetensors header", "a safetensors header")
    header.pop("__metadata__", None)
    return _shapes(header, path)


def _state_dict(path: str) -> ModelShapes:
    try:
        with zipfile.ZipFile(path) as zf:
            obj, unpickler = read_pickle(zf)
    except (zipfile.BadZipFile, pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError,
            AttributeError, MemoryError, RecursionError, NotImplementedError, OverflowError,
            UnicodeDecodeError) as exc:
        raise BadInput(f"--model {path}: cannot read it as a torch state dict ({type(exc).__name__}: {exc})"[:300]) \
            from None
    notes = []
    if unpickler.suspicious:
        notes.append(f"{path}: its pickle names code outside the allow-list (not run): "
                     + ", ".join(unpickler.suspicious[:5]))
    for _ in range(2):  # {"state_dict": {...}} or {"model": {"module": {...}}}
        if isinstance(obj, dict) and not any(isinstance(v, TensorMeta) for v in obj.values()):
            inner = next((k for k in WRAPPERS if isinstance(obj.get(k), dict)), None)
            if inner is None:
                break
            notes.append(f"the state dict is under the `{inner}` key of the file")
            obj = obj[inner]
    if not isinstance(obj, dict):
        raise BadInput(f"--model {path}: holds a {type(obj).__name__}, not a state dict")
    shapes = tensor_shapes(obj)
    if not shapes:
        raise BadInput(f"--model {path}: no tensors in it: not a state dict")
    return ModelShapes(path, "state_dict", shapes, notes)


def _mapping(path: str, kind: str) -> ModelShapes:
    with open(path, "rb") as f:
        data = f.read(MAX_TEXT_BYTES + 1)
    if len(data) > MAX_TEXT_BYTES:
        raise BadInput(f"--model {path}: larger than {MAX_TEXT_BYTES} bytes")
    try:
        text = data.decode("utf-8")
        if kind == "yaml":
            import yaml

            obj = yaml.safe_load(text)
        else:
            obj = json.loads(text)
    except Exception as exc:  # noqa: BLE001 - any parse error is a bad --model file
        raise BadInput(f"--model {path}: not valid {kind.upper()} ({type(exc).__name__}: {exc})"[:300]) from None
    if not isinstance(obj, dict):
        raise BadInput(f"--model {path}: expected a mapping of parameter names to shapes")
    return ModelShapes(path, kind, _shapes(obj, path))


def _shapes(obj: dict, path: str) -> dict[str, tuple]:
    out = {}
    for name, value in obj.items():
        if isinstance(value, dict):
            value = value.get("shape")
        if not isinstance(value, (list, tuple)) or not all(isinstance(d, int) and not isinstance(d, bool)
                                                            for d in value):
            raise BadInput(f"--model {path}: the shape of {str(name)[:80]!r} is not a list of integers")
        out[str(name)] = tuple(value)
    if not out:
        raise BadInput(f"--model {path}: no parameter names in it")
    return out


def saved_shapes(meta: ShardMeta) -> tuple[dict[str, tuple] | None, str]:
    """What a model-states shard says the model is: the module state's tensor shapes (buffers
    included), overridden by param_shapes / frozen_param_shapes (ZeRO-3 saves params empty)."""
    shapes: dict[str, tuple] = {}
    sources = []
    if meta.module_shapes:
        shapes.update(meta.module_shapes)
        sources.append("module")
    if meta.param_shapes:
        shapes.update({k: v for k, v in meta.param_shapes.items() if isinstance(v, tuple)})
        sources.append("param_shapes")
    if meta.frozen_param_shapes:
        shapes.update(meta.frozen_param_shapes)
        sources.append("frozen_param_shapes")
    return (shapes or None), " + ".join(sources)


def shapes_of(path: str) -> dict:
    """name -> shape of a DeepSpeed model-states shard (its saved shapes) or of a model file
    (read_model); BadInput when it cannot be read. No pickle is run, no tensor byte read."""
    from triage.probe.checkpoint import parse_name
    from triage.probe.safe_pickle import read_shard

    shard = parse_name(os.path.basename(path))
    if shard and shard.kind in ("model", "zero3_model"):
        meta = read_shard(path)
        if meta.error:
            raise BadInput(f"{path}: {meta.error}")
        return saved_shapes(meta)[0] or {}
    return read_model(path).shapes


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m triage.probe.model_file",
                                     description="Print name<TAB>shape lines of a model file or a DeepSpeed "
                                     "model-states shard, without running pickles or reading tensor bytes.")
    parser.add_argument("file")
    args = parser.parse_args(argv)
    try:
        shapes = shapes_of(args.file)
    except BadInput as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 3
    try:
        for name in sorted(shapes):
            sys.stdout.write(f"{name}\t{list(shapes[name])}\n")
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
