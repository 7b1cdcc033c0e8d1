"""`ds-triage inspect FILE` as pasted: what a shard's pickle says (saved ds_config, dp/mp world sizes,
top-level keys), read by its JSON shape, so a virtual checkpoint knows what the probe reads from the
file itself. It becomes that file's ShardMeta (VirtualContext.meta): the layout, completeness and
config checks then run unchanged on the saved stage, precision and world size.

`inspect --config FILE` prints a bare ds_config, which has the shape of the load's own ds_config: it is
read as the saved one only when the paste's `$ ds-triage inspect --config FILE` line says so.
"""

from __future__ import annotations

import json
import re

from triage.probe.safe_pickle import ShardMeta

# the keys `ds-triage inspect FILE` (safe_pickle.show) always prints, in its order
SHAPE = ("path", "error", "suspicious", "ds_version", "dp_world_size", "mp_world_size", "zero_stage")
KEPT = ("ds_version", "dp_world_size", "mp_world_size", "zero_stage", "partition_count", "top_keys",
        "parallel_dimensions", "ds_config")
TOP_KEY = re.compile(r'^ "\w+": ')  # a top-level key of its indent=1 JSON
MAX_KEYS = 32  # safe_pickle.show prints 18


def inspect(lines: list[str], command: str = ""):
    """The full JSON (a paste cut short after the keys that matter is read as far as it goes), or a bare
    ds_config under its `inspect --config` command line. Facts: file, and the ShardMeta fields shown."""
    text = "\n".join(lines).strip()
    if not text.startswith("{"):
        return None
    data = _json(text, lines)
    if not isinstance(data, dict):
        return None
    if all(k in data for k in SHAPE) and isinstance(data.get("path"), str):
        return {"file": data["path"], **{k: data[k] for k in KEPT if k in data}}, list(range(len(lines)))
    named = _config_only(command)
    if named:
        return {"file": named, "ds_config": data}, list(range(len(lines)))
    return None


def _config_only(command: str) -> str | None:
    """The FILE of `ds-triage inspect --config FILE` (or `python -m triage.probe.safe_pickle --config FILE`)."""
    words = command.split()
    inspect = any(words[i:i + 2] in (["ds-triage", "inspect"], ["-m", "triage.probe.safe_pickle"])
                  for i in range(len(words)))
    files = [w for w in words if w.endswith(".pt")]
    return files[-1] if inspect and "--config" in words and files else None


def _json(text: str, lines: list[str]):
    try:
        return json.loads(text)
    except ValueError:
        pass
    # cut short (a pager, a terminal's scrollback, /run's cap): the whole top-level keys before the cut.
    # Only inspect's own shape (its first key "path"), and only its few keys tried: a bound on the work
    body = [line for line in lines if line.strip()][:2]
    if len(body) < 2 or not body[1].startswith(' "path": '):
        return None
    starts = [i for i, line in enumerate(lines) if TOP_KEY.match(line)][:MAX_KEYS]
    for end in reversed(starts[1:]):
        body = "\n".join(lines[:end]).rstrip().rstrip(",")
        try:
            return json.loads(body + "\n}")
        except ValueError:
            continue
    return None


def shard_meta(facts: dict, path: str) -> ShardMeta:
    """The pasted inspect output as the ShardMeta the safe reader would have made of the file."""
    meta = ShardMeta(path=path)
    for name in KEPT:
        value = facts.get(name)
        if name == "ds_config" and not isinstance(value, dict):
            continue
        if name in ("dp_world_size", "mp_world_size", "zero_stage") and not isinstance(value, int):
            continue
        if (name == "top_keys" and not isinstance(value, list)) or (name == "parallel_dimensions"
                                                                     and not isinstance(value, dict)):
            continue
        if value is not None:
            setattr(meta, name, value)
    return meta
