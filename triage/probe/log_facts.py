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

from triage.logs.facts import flat_partition, key_lists, size_mismatches

# A rank label torchrun or the job may put before each line: "[rank0]: ", "0: ", "[default0]:".
_PREFIX = re.compile(r"^(?:\[(?:rank|default)\d+\]:|\d+:) ?")
_CONFIG_START = re.compile(r"print_user_config\]\s+json = \{\s*$", re.M)
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
    """torch's complaints in the log, read by the parser classify uses (triage.logs.facts)."""
    claims = ModelClaims()
    offsets = []
    for at, kind, names in key_lists(text):
        target = claims.missing if kind == "Missing" else claims.unexpected
        target.extend(n for n in names if n not in target)
        offsets.append(at)
    for at, name, saved, model in size_mismatches(text):
        if isinstance(saved, list) and isinstance(model, list):  # a shape printed whole
            claims.sizes.setdefault(name, (tuple(saved), tuple(model)))
            offsets.append(at)
    partition = flat_partition(text)
    if partition:
        claims.partition = partition[1:]
        offsets.append(partition[0])
    claims.line = text.count("\n", 0, min(offsets)) + 1 if offsets else 0
    return claims
