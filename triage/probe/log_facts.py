"""What a failing job's own log says about the load, for the probes to check on disk.

Two things DeepSpeed and torch print that a checkpoint can confirm or refute:

* the user's ds_config, which DeepSpeed's `print_user_config` dumps at INFO level as
  ``json = {`` ... ``}`` (engine start-up, every rank or rank 0);
* torch's `load_state_dict` error (module.py, `_load_from_state_dict` and friends):
  ``Missing key(s) in state_dict: "a", "b".``, ``Unexpected key(s) in state_dict: ...`` and
  ``size mismatch for NAME: copying a param with shape torch.Size([..]) from checkpoint, the
  shape in current model is torch.Size([..]).``: claims about the checkpoint that its saved
  `param_shapes` either bear out or not;
* torch's ``The size of tensor a (N) must match the size of tensor b (M)`` from the copy of a
  saved flat fp32 partition (M elements) into the load's (N): a claim the optimizer shards'
  saved partitions bear out or not.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

# A rank label torchrun or the job may put before each line: "[rank0]: ", "0: ", "[default0]:".
_PREFIX = re.compile(r"^(?:\[(?:rank|default)\d+\]:|\d+:) ?")
_CONFIG_START = re.compile(r"print_user_config\]\s+json = \{\s*$", re.M)
_KEYS = re.compile(r"(Missing|Unexpected) key\(s\) in state_dict: ((?:\"[^\"\n]*\"(?:, )?)+)")
_SIZE = re.compile(r"size mismatch for ([^:\s]+): copying a param with shape torch\.Size\(\[([\d, ]*)\]\) from "
                   r"checkpoint, the shape in current model is torch\.Size\(\[([\d, ]*)\]\)")
_QUOTED = re.compile(r'"([^"\n]*)"')
# torch's copy_ of a saved flat fp32 partition into the load's (ZeRO-1/2/3, the bf16 and fp16
# optimizers): tensor a is the load's partition, tensor b the saved one.
_PARTITION = re.compile(r"The size of tensor a \((\d{1,30})\) must match the size of tensor b \((\d{1,30})\)")
MAX_DIM_DIGITS = 30  # a longer "dimension" is no shape (and int() refuses 4,300+ digits)
MAX_CONFIG_LINES = 2000


@dataclass
class ModelClaims:
    """What torch said differs between the checkpoint and the model the job built."""

    missing: list[str] = field(default_factory=list)  # the model has them, the checkpoint (says torch) does not
    unexpected: list[str] = field(default_factory=list)  # the checkpoint has them, the model does not
    sizes: dict[str, tuple[tuple, tuple]] = field(default_factory=dict)  # name -> (checkpoint, model) shape
    partition: tuple[int, int] | None = None  # a flat fp32 partition's elements: (saved, the load's)
    line: int = 0  # first line of the error in the log

    def __bool__(self) -> bool:
        return bool(self.missing or self.unexpected or self.sizes or self.partition)


def user_config(text: str) -> tuple[dict | None, int]:
    """The ds_config DeepSpeed printed (the first dump), and its line number; (None, 0) if none parses."""
    m = _CONFIG_START.search(text)
    if not m:
        return None, 0
    body = ["{"]
    for raw in text[m.end():].split("\n", MAX_CONFIG_LINES)[1:MAX_CONFIG_LINES]:
        line = _PREFIX.sub("", raw)
        body.append(line)
        if line.rstrip() == "}":
            break
    try:
        config = json.loads("\n".join(body))
    except ValueError:
        return None, 0
    return (config, text.count("\n", 0, m.start()) + 1) if isinstance(config, dict) else (None, 0)


def model_claims(text: str) -> ModelClaims:
    claims = ModelClaims()
    for m in _KEYS.finditer(text):
        names = _QUOTED.findall(m.group(2))
        kind = claims.missing if m.group(1) == "Missing" else claims.unexpected
        kind.extend(n for n in names if n not in kind)
        claims.line = claims.line or text.count("\n", 0, m.start()) + 1
    for m in _SIZE.finditer(text):
        saved, model = _shape(m.group(2)), _shape(m.group(3))
        if saved is None or model is None:
            continue
        claims.sizes.setdefault(m.group(1), (saved, model))
        claims.line = min(claims.line or 1 << 62, text.count("\n", 0, m.start()) + 1)
    m = _PARTITION.search(text)
    if m and m.group(1) != m.group(2):
        claims.partition = (int(m.group(2)), int(m.group(1)))
        claims.line = min(claims.line or 1 << 62, text.count("\n", 0, m.start()) + 1)
    return claims


def _shape(text: str) -> tuple | None:
    dims = [x for x in text.replace(" ", "").split(",") if x]
    return None if any(len(x) > MAX_DIM_DIGITS for x in dims) else tuple(int(x) for x in dims)
