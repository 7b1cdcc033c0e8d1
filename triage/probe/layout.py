"""How a tag was saved: file names (checkpoint.name_layout) joined with its saved metadata.

The metadata comes from one model-states file and one optimizer shard (safe_pickle), so the
cost does not grow with the number of ranks. `expected_files` lists every shard those degrees
make DeepSpeed write, which the completeness probe compares with the directory.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from triage.probe.checkpoint import NameLayout, TagListing, name_layout
from triage.probe.safe_pickle import ShardMeta

STAGE_FAMILY = {0: "0", 1: "1/2", 2: "1/2", 3: "3"}
# Degrees and layer indices come from file names and from the shards' pickles, so a crafted or
# damaged checkpoint can claim any number; ranges over them are built only under these caps.
MAX_RANKS = 1 << 17  # the largest DeepSpeed jobs run on tens of thousands of GPUs
MAX_LAYER = 100_000


@dataclass
class SavedLayout:
    names: NameLayout
    stage: int | None = None
    stage_source: str = ""
    dp: int | None = None
    mp: int | None = None
    tp: int | None = None
    pp: int | None = None
    bf16: bool | None = None
    ds_config: dict | None = None
    offload: dict[str, str] = field(default_factory=dict)  # "optimizer"/"param" -> device (cpu, nvme), from the ds_config
    notes: list[str] = field(default_factory=list)

    @property
    def stage_family(self) -> str | None:
        return STAGE_FAMILY.get(self.stage) if self.stage is not None else self.names.stage_family

    @property
    def world_size(self) -> int | None:
        if self.dp is None:
            return None
        return self.dp * (self.mp or 1)

    def describe(self) -> str:
        stage = f"ZeRO-{self.stage}" if self.stage is not None else {
            "1/2": "ZeRO-1/2", "3": "ZeRO-3", "0": "ZeRO-0"}.get(self.names.stage_family or "", "ZeRO stage unknown")
        parts = [stage, f"dp {self.dp if self.dp is not None else '?'}"]
        if self.tp and self.tp > 1:
            parts.append(f"tp {self.tp}")
        if self.pp and self.pp > 1:
            parts.append(f"pp {self.pp}")
        if self.mp and self.mp > 1 and not (self.tp or self.pp):
            parts.append(f"mp {self.mp}")
        if self.bf16 is not None:
            parts.append("bf16" if self.bf16 else "no bf16")
        if self.names.layers:
            parts.append(f"{len(self.names.layers)} pipeline layer files")
        if self.names.experts:
            parts.append("MoE expert files")
        if self.names.universal:
            parts.append("universal (zero/ folder)")
        parts += [f"{what} offloaded to {device}" for what, device in self.offload.items()]
        return ", ".join(parts)


def first_model_file(listing: TagListing):
    shards = listing.of("model") or listing.of("zero3_model")
    return shards[0] if shards else None


def first_optim_file(listing: TagListing):
    shards = listing.of("optim")
    return shards[0] if shards else None


def saved_layout(listing: TagListing, model: ShardMeta | None, optim: ShardMeta | None) -> SavedLayout:
    names = name_layout(listing)
    model_ok = model if model is not None and model.error is None else None
    if names.stage_family == "0" and model_ok is None:
        # model states alone name a ZeRO-0 save or a ZeRO-1/2 one whose optimizer shards are gone: only the
        # file's saved ds_config tells them apart (a listing's, or an unreadable file's, names do not)
        names = replace(names, stage_family=None)
    layout = SavedLayout(names=names)
    optim_ok = optim if optim is not None and optim.error is None else None
    config = (model_ok.ds_config if model_ok else None) or (optim_ok.ds_config if optim_ok else None)
    layout.ds_config = config
    layout.offload = saved_offload(config)
    if optim_ok is not None and optim_ok.zero_stage is not None:
        layout.stage, layout.stage_source = optim_ok.zero_stage, "the optimizer shard's zero_stage"
    elif config is not None:
        zero = config.get("zero_optimization")
        stage = zero.get("stage", 0) if isinstance(zero, dict) else 0
        if isinstance(stage, int):
            layout.stage, layout.stage_source = stage, "the saved ds_config"
    elif names.stage_family in ("0", "3"):
        layout.stage, layout.stage_source = int(names.stage_family), "the file names"
    if layout.stage is not None and names.stage_family and STAGE_FAMILY.get(layout.stage) != names.stage_family \
            and names.stage_family != "0":
        layout.notes.append(f"the file names look like ZeRO-{names.stage_family} but {layout.stage_source} "
                            f"says {layout.stage}")
    if model_ok is not None:
        layout.dp, layout.mp = model_ok.dp_world_size, model_ok.mp_world_size
        dims = model_ok.parallel_dimensions or {}
        layout.tp = dims.get("tp_degree") if isinstance(dims.get("tp_degree"), int) else None
        layout.pp = dims.get("pp_degree") if isinstance(dims.get("pp_degree"), int) else None
    if layout.dp is None and optim_ok is not None:
        count = optim_ok.partition_count
        count = count[0] if isinstance(count, (list, tuple)) and count else count
        layout.dp = count if isinstance(count, int) else None
    if layout.dp is None:
        layout.dp = names.dp
    if layout.mp is None:
        layout.mp = names.mp
    _refuse_absurd_degrees(layout)
    if names.bf16 is not None:
        layout.bf16 = names.bf16
    elif config is not None:
        bf16 = config.get("bf16") or config.get("bfloat16") or {}
        layout.bf16 = bool(bf16.get("enabled")) if isinstance(bf16, dict) else None
    return layout


def _refuse_absurd_degrees(layout: SavedLayout) -> None:
    """Drop (and note) a degree no real job has: 10**10 ranks would build a 10**10-long file list."""
    for what in ("dp", "mp", "tp", "pp"):
        value = getattr(layout, what)
        if value is not None and not 1 <= value <= MAX_RANKS:
            layout.notes.append(f"the saved {what} degree {value} is absurd (not 1..{MAX_RANKS}): ignored; "
                                "the file names or metadata are damaged or crafted")
            setattr(layout, what, None)
    if layout.dp and layout.mp and layout.dp * layout.mp > MAX_RANKS:
        layout.notes.append(f"dp {layout.dp} x mp {layout.mp} is more than {MAX_RANKS} ranks: absurd, ignored; "
                            "the file names or metadata are damaged or crafted")
        layout.dp = layout.mp = None


def layer_gaps(layers: list[int], shown: int = 8) -> tuple[int, list[int]]:
    """How many layer indices below the highest are missing, and the first `shown` of them,
    without building a range as long as the highest index (a file name can say 9999999999)."""
    first: list[int] = []
    expected = 0
    for layer in layers:  # sorted, distinct
        while expected < layer and len(first) < shown:
            first.append(expected)
            expected += 1
        expected = layer + 1
    return (layers[-1] + 1 - len(layers) if layers else 0), first


def saved_offload(config: dict | None) -> dict[str, str]:
    """ZeRO-Offload / ZeRO-Infinity as saved: {"optimizer": "cpu", "param": "nvme"}; {} for none."""
    zero = (config or {}).get("zero_optimization")
    out = {}
    for what in ("optimizer", "param"):
        section = zero.get(f"offload_{what}") if isinstance(zero, dict) else None
        device = section.get("device") if isinstance(section, dict) else None
        if isinstance(device, str) and device.lower() not in ("none", ""):
            out[what] = device.lower()
    return out


def expected_files(layout: SavedLayout) -> dict[str, list[str]] | None:
    """kind -> file names DeepSpeed writes for these degrees; None when the degrees are unknown."""
    if layout.stage is None or layout.dp is None or layout.mp is None:
        return None
    dps, mps = range(layout.dp), range(layout.mp)
    prefix = "bf16_" if layout.bf16 and layout.stage > 0 else ""
    if layout.stage == 3:
        model = [f"zero_pp_rank_{d}_mp_rank_{m:02d}_model_states.pt" for d in dps for m in mps]
    else:
        model = [f"mp_rank_{m:02d}_model_states.pt" for m in mps]
    optim = [f"{prefix}zero_pp_rank_{d}_mp_rank_{m:02d}_optim_states.pt" for d in dps for m in mps] \
        if layout.stage > 0 else []
    return {"model": model, "optim": optim}


def files_for_target(stage: int, bf16: bool | None) -> str:
    """What a load at `stage` globs for, in words (for the evidence)."""
    if stage == 3:
        return "zero_pp_rank_*_mp_rank_*_model_states.pt (one per rank)"
    return "mp_rank_*_model_states.pt"
