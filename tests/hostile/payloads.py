"""Pickles whose loading runs code, planted in copies of real DeepSpeed checkpoints.

The payload is `exec` of one line that writes a marker file: harmless, and a test sees whether any
load ran it. Each builder returns the path it planted into; the checkpoint is a copy of a baseline
from tests/probe_checkpoints.py, re-saved with real torch.save so only the payload is new.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests import probe_checkpoints as pc

TAG = "global_step3"
PAYLOAD_KEY = "ds_triage_test_payload"


class MarkerPayload:
    """Unpickling this runs exec(...), which writes `marker`: what torch.load(weights_only=False) would do."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').write('payload ran')",)


def copy_baseline(layout: str, dest: Path) -> Path:
    """A private copy of a real baseline checkpoint root (latest + tag dir)."""
    shutil.copytree(pc.baselines() / layout, dest, symlinks=True)
    return dest


def _resave(path: Path, marker: Path, legacy: bool) -> Path:
    import torch

    state = torch.load(path, map_location="cpu", weights_only=False)  # our own baseline: trusted
    state[PAYLOAD_KEY] = MarkerPayload(marker)
    torch.save(state, path, _use_new_zipfile_serialization=not legacy)
    return path


def zip_payload(root: Path, marker: Path, shard: str = "mp_rank_00_model_states.pt") -> Path:
    """A `__reduce__` payload inside a real shard, saved in torch's zip format."""
    return _resave(root / TAG / shard, marker, legacy=False)


def legacy_payload(root: Path, marker: Path, shard: str = "mp_rank_00_model_states.pt") -> Path:
    """The same shard re-saved in torch's legacy (non-zip) format, with the payload."""
    return _resave(root / TAG / shard, marker, legacy=True)


def legacy_clean(root: Path, shard: str = "mp_rank_00_model_states.pt") -> Path:
    """The shard re-saved in the legacy format, nothing added: what an old torch would have written."""
    import torch

    path = root / TAG / shard
    torch.save(torch.load(path, map_location="cpu", weights_only=False), path, _use_new_zipfile_serialization=False)
    return path


def stray_payload(root: Path, marker: Path, name: str = "extra_optim_states.pt") -> Path:
    """A file DeepSpeed's converters glob (`*_optim_states.pt`) but our SHARD_PATTERNS do not name,
    holding a real optimizer shard's state plus the payload."""
    import torch

    source = sorted((root / TAG).glob("zero_pp_rank_0_*optim_states.pt"))[0]
    state = torch.load(source, map_location="cpu", weights_only=False)
    state[PAYLOAD_KEY] = MarkerPayload(marker)
    path = root / TAG / name
    torch.save(state, path)
    return path
