"""The names DeepSpeed gives the files of a tag dir, and what each holds: one table, read by the
probes (a listing's shards) and by classify (which file an error says was missing). Standard
library only; classify imports it."""

from __future__ import annotations

import re

SHARD_PATTERNS = (
    ("zero3_model", re.compile(r"^zero_pp_rank_(?P<dp>\d+)_mp_rank_(?P<mp>\d+)_model_states\.pt$")),
    ("model", re.compile(r"^mp_rank_(?P<mp>\d+)_model_states\.pt$")),
    ("optim", re.compile(r"^(?P<bf16>bf16_)?zero_pp_rank_(?P<dp>\d+)_mp_rank_(?P<mp>\d+)_?optim_states\.pt$")),
    ("layer", re.compile(r"^layer_(?P<layer>\d+)(?:-(?P<repr>[a-z]+_\d+(?:-[a-z]+_\d+)*))?-model_states\.pt$")),
    ("expert", re.compile(r"^(?:layer_(?P<layer>\d+)_)?expert_(?P<expert>\d+)_mp_rank_(?P<mp>\d+)_model_states\.pt$")),
    ("expert_optim", re.compile(r"^expp_rank_(?P<ep>\d+)_mp_rank_(?P<mp>\d+)_optim_states\.pt$")),
)


def match_name(name: str) -> tuple[str, dict] | None:
    """(kind, the numbers its name carries) of a file DeepSpeed writes into a tag dir, or None."""
    for kind, pattern in SHARD_PATTERNS:
        found = pattern.match(name)
        if found:
            return kind, found.groupdict()
    return None
