"""Shared by the repair, verify and guarded-save tests: model factories for --model-factory (the
corpus workers' model, so the verifying loads run on the checkpoints the corpus trained), the
param checksum each baseline's training log printed, and the real loads that fail before a repair."""

import re
from pathlib import Path

from tests import probe_checkpoints as pc

FACTORY = "tests.repair_support:tiny"
SGD_FACTORY = "tests.repair_support:tiny_sgd"


def _batch():
    import torch

    generator = torch.Generator().manual_seed(7)
    return torch.randn(4, 128, generator=generator), torch.randint(0, 8, (4,), generator=generator)


def tiny():
    """The corpus model (AdamW from the checker) and a batch: the load, then one training step."""
    from corpus.workers.common import TinyNet

    return {"model": TinyNet(), "batch": _batch()}


def tiny_sgd():
    """With SGD(momentum), where the checkpoints saved AdamW state (corpus case zero2-dp1-adamw-saved-sgd-load)."""
    import torch

    from corpus.workers.common import TinyNet

    model = TinyNet()
    return {"model": model, "optimizer": torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9),
            "batch": _batch()}


def saved_checksum(layout: str) -> float:
    """The sum of |param| the training run printed after saving (corpus/workers/train_save.py)."""
    import json

    base = pc.baselines()
    text = Path(json.loads((base / f"{layout}.json").read_text())["log"]).read_text(errors="replace")
    # the launch may have trained several layouts (corpus.generate.build_bases): this one's line
    return float(re.search(rf"saved checkpoint to {re.escape(str(base / layout))} .* param checksum ([\d.]+)",
                           text).group(1))


def ext_env() -> dict:
    """DeepSpeed's CPU comm op, built once for the corpus (probe_checkpoints.baselines)."""
    from corpus import generate

    return {"TORCH_EXTENSIONS_DIR": str(generate.EXT_CACHE), "DS_ACCELERATOR": "cpu"}


def load(root, *, mode="resume", world_size=1, config=None, factory=FACTORY, tag=None):
    """A real DeepSpeed load (triage/repair/load_check.py under torchrun) of `root`."""
    from triage.repair import real_load
    from triage.repair.plan import LoadSpec

    config = config or {"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2}}
    spec = LoadSpec(mode=mode, load_dir=str(root), tag=tag, world_size=world_size, config=config,
                    config_source="the test")
    return real_load.run(spec, factory)


def hang():
    """A model that never comes: the rank says it started (in $DS_TRIAGE_TEST_STARTED.<rank>), then
    sleeps, so a time limit is what ends the load (tests of --timeout)."""
    import os
    import time

    marker = os.environ.get("DS_TRIAGE_TEST_STARTED")
    if marker:
        with open(f"{marker}.{os.environ.get('RANK', '0')}", "w") as f:
            f.write(str(os.getpid()))
    time.sleep(3600)


def processes_with(marker: str) -> list[int]:
    """Live processes (not zombies) whose environment holds `marker`: what a killed run left behind."""
    import os

    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker.encode() in env and state != b"Z":
            found.append(int(entry))
    return found
