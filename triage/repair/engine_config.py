"""The ds_config a verifying load starts its engine with: the user's --config, else the one the
checkpoint was saved with (its model-states file keeps it), adjusted to the load's world size."""

from __future__ import annotations

import copy

from triage.probe.target import read_config


def base_config(source, options) -> tuple[dict, str]:
    if options.config:
        return read_config(options.config), f"--config {options.config}"
    layout = source.layout()
    if layout.ds_config:
        return copy.deepcopy(layout.ds_config), "the ds_config saved in the checkpoint"
    stage = layout.stage if layout.stage is not None else 0
    return ({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": stage}},
            f"a minimal ds_config for ZeRO-{stage} (none saved in the checkpoint)")


def fit_world_size(config: dict, world_size: int, saved_world: int | None) -> list[str]:
    """DeepSpeed asserts train_batch_size == micro batch x accumulation x world size: on another
    world size a saved train_batch_size no longer fits, so the micro batch decides."""
    if saved_world is None or world_size == saved_world or "train_batch_size" not in config:
        return []
    if "train_micro_batch_size_per_gpu" not in config:
        return []
    value = config.pop("train_batch_size")
    return [f"train_batch_size {value} dropped for the load on {world_size} rank(s) (saved on {saved_world}); "
            "train_micro_batch_size_per_gpu decides it"]


def config_for_check(source, options, world_size: int) -> tuple[dict, str, list[str]]:
    config, label = base_config(source, options)
    notes = fit_world_size(config, world_size, source.layout().world_size)
    return config, label, notes
