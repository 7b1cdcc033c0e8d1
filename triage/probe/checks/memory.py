"""memory: will the host hold what every rank reads while it loads?

Needed, per rank: the files DeepSpeed's load unpickles on that rank (ZeRO-0/1/2: the whole
mp_rank model-states file and the rank's own optimizer shard, every shard of its model-parallel
rank with `elastic_checkpoint`; ZeRO-3: the rank's own zero_pp_rank model-states file and
optimizer shard; pipeline: the stage's model-states file and its share of the layer files; a
Hugging Face model dir: every weight file, as each rank's from_pretrained reads them), counted
twice: torch.load holds the loaded copy while the engine already holds its own parameters and
optimizer state (a bound: on CPU, Optimizer.load_state_dict adopts the loaded moments in place of
the engine's, and on a GPU node the engine's state is in device memory; a real load's peak stays
between half the estimate and all of it, tests/test_memory_rss.py). Times the ranks on the host
(--ranks-per-node, else the target world size, else the saved one: one node). A rough estimate,
said as such; the runtime's own footprint (interpreter, torch, DeepSpeed, its buffers: a few
hundred MiB a rank on CPU) is not in it.

Available: --host-memory (the loading node, when it is not this one), else this host's
MemAvailable (/proc/meminfo), lowered by a cgroup memory limit (v2 memory.max or v1
limit_in_bytes, minus what the group already uses).

Confirmed (too_small) when the estimate exceeds what is available; refuted when it needs at most
half of it; in between, inconclusive (it may fit). Either way the report names what lowers the
need: load_optimizer_states=False, a universal checkpoint, fewer ranks per node.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from triage.probe.context import ProbeContext
from triage.probe.layout import first_model_file
from triage.probe.result import ProbeResult, outcome

NAME = "memory"
CGROUP_V2 = "/sys/fs/cgroup"
CGROUP_V1 = "/sys/fs/cgroup/memory"
MARGIN = 2.0  # refuted only when the estimate is at most 1/MARGIN of what is available
WEIGHT_FILES = (("model", "pytorch_model", "adapter_model"), (".safetensors", ".bin"))  # what from_pretrained reads
MAX_WEIGHT_FILES = 10_000  # a model dir is listed, never walked: bound the names it may hold


@dataclass
class Reads:
    """What one rank unpickles, in bytes, and how it was counted."""
    model: int = 0  # its model-states file (and its stage's layer files)
    optim: int = 0  # its optimizer shard(s)
    largest_param: int = 0  # fp32 bytes of the largest parameter (a universal load reads it x3 at once)
    what: str = "nothing"
    universal: bool = False  # ds_to_universal's output: zero/<param>/ files, read one parameter at a time

    @property
    def total(self) -> int:
        return self.model + self.optim


def probe(ctx: ProbeContext) -> ProbeResult:
    reads = _deepspeed_reads(ctx) or _weight_files(ctx)
    if reads is None:
        return ProbeResult(NAME, "inconclusive", "no readable tag or model weights to size", [], "")
    ranks, ranks_source = _ranks(ctx)
    need = 2 * reads.total * ranks
    available, available_source = _available(ctx)
    where = ctx.q(ctx.ckpt.tag) if ctx.ckpt.root and ctx.ckpt.tag else ctx.q()
    command = f"du -ab {where} | sort -n | tail; grep MemAvailable /proc/meminfo; " \
              "cat /sys/fs/cgroup/memory.max 2>/dev/null"
    context = [f"each rank reads about {_size(reads.total)} ({reads.what}); x2 (the loaded copy beside the engine's "
               f"own) x {ranks} rank(s) on the host ({ranks_source}) = {_size(need)}",
               f"available: {_size(available)} ({available_source})" if available is not None else
               "available memory unknown: no /proc/meminfo and no --host-memory"]
    context += _lower(reads, ranks, available)
    facts = {"per_rank_bytes": reads.total, "ranks": ranks, "need_bytes": need, "available_bytes": available}
    if available is None:
        return outcome(NAME, signals=[], checked=[], complete=False, found="", clear="",
                       unknown="cannot tell how much memory the host has", evidence=[], context=context,
                       command=command, facts=facts)
    signals = ["too_small"] if need > available else []
    evidence = [f"loading needs about {_size(need)}, the host has {_size(available)} available"] if signals else []
    fits = need * MARGIN <= available
    return outcome(NAME, signals=signals, checked=["too_small"] if fits or signals else [], complete=fits,
                   found="the load likely needs more memory than the host has",
                   clear=f"the load fits in memory ({_size(need)} of {_size(available)})",
                   unknown=f"the load may not fit: about {_size(need)} of {_size(available)} available",
                   evidence=evidence, context=context, command=command, facts=facts)


def _deepspeed_reads(ctx: ProbeContext) -> Reads | None:
    layout, listing = ctx.layout(), ctx.listing
    if layout is None or listing is None:
        return None

    def size(shard) -> int:
        try:
            return os.stat(ctx.shard_path(shard.name)).st_size
        except OSError:
            return 0

    models = listing.of("zero3_model") or listing.of("model")
    layers, optims = listing.of("layer"), listing.of("optim")
    model = max(map(size, models), default=0)
    layer_bytes, stages = sum(map(size, layers)), max(1, layout.pp or len(listing.of("model")) or 1)
    elastic = bool(((layout.ds_config or {}).get("zero_optimization") or {}).get("elastic_checkpoint"))
    optim = sum(map(size, optims)) // max(1, layout.mp or 1) if elastic else max(map(size, optims), default=0)
    parts = [f"a model-states file of {_size(model)}"] if model else []
    if layer_bytes:
        parts.append(f"its share of {len(layers)} layer files of {_size(layer_bytes)} over {stages} stage(s)")
    if optim:
        parts.append(f"{'every optimizer shard (elastic_checkpoint)' if elastic else 'an optimizer shard'} of "
                     f"{_size(optim)}")
    first = first_model_file(listing)  # the file layout() has read already
    shapes = (ctx.meta(first.name).param_shapes or {}) if first else {}
    largest = max((4 * math.prod(shape) for shape in shapes.values() if isinstance(shape, tuple)), default=0)
    if listing.universal and not optims:  # fp32 weights, exp_avg, exp_avg_sq of one parameter at a time
        optim = 3 * largest
        parts.append(f"one parameter's fp32 weights and two Adam moments at a time from zero/ (the largest: 3 x "
                     f"{_size(largest)})")
    return Reads(model + math.ceil(layer_bytes / stages), optim, largest, ", ".join(parts) or "nothing",
                 listing.universal)


def _weight_files(ctx: ProbeContext) -> Reads | None:
    """A Hugging Face model dir (from_pretrained): every rank reads all its weight files."""
    if ctx.ckpt.root is not None or not os.path.isdir(ctx.ckpt.given):
        return None
    sizes = []
    try:
        with os.scandir(ctx.ckpt.given) as entries:
            for entry in entries:
                if len(sizes) >= MAX_WEIGHT_FILES:
                    break
                if entry.name.startswith(WEIGHT_FILES[0]) and entry.name.endswith(WEIGHT_FILES[1]) \
                        and entry.is_file(follow_symlinks=False):
                    sizes.append(entry.stat(follow_symlinks=False).st_size)
    except OSError:  # unreadable: the permission probe says why; nothing to size here
        return None
    if not sizes:
        return None
    return Reads(model=sum(sizes), what=f"{len(sizes)} weight file(s) of {_size(sum(sizes))}, as from_pretrained")


def _lower(reads: Reads, ranks: int, available: int | None) -> list[str]:
    """What lowers the need, each with its estimate: the engine keeps its own state (about what a
    full load reads), so only the loaded copy shrinks."""
    lines = []
    if reads.optim:
        lines.append(f"lower it: load_checkpoint(..., load_optimizer_states=False) reads only the model states: about "
                     f"{_size((reads.total + reads.model) * ranks)} (unsafe: the optimizer restarts cold)")
        if reads.largest_param and not reads.universal:
            universal = reads.total + reads.model + 3 * reads.largest_param
            lines.append(f"lower it: a universal checkpoint (ds_to_universal, checkpoint.load_universal) reads one "
                         f"parameter's fp32 weights and two Adam moments at a time (the largest: 3 x "
                         f"{_size(reads.largest_param)}) in place of the optimizer shard: about "
                         f"{_size(universal * ranks)}")
    if available is not None and reads.total:
        fit = available // (2 * reads.total)
        if fit < ranks:
            lines.append(f"lower it: fewer ranks per node: {fit} fit in {_size(available)}")
    return lines


def _ranks(ctx: ProbeContext) -> tuple[int, str]:
    if ctx.ranks_per_node:
        return ctx.ranks_per_node, "--ranks-per-node"
    if ctx.target.world_size:
        return ctx.target.world_size, f"world size {ctx.target.describe('world_size')}, one node"
    layout = ctx.layout()
    saved = layout.world_size if layout is not None else None
    return saved or 1, "the saved world size, one node" if saved else "one"


def _available(ctx: ProbeContext) -> tuple[int | None, str]:
    if ctx.host_memory:
        return ctx.host_memory, "--host-memory"
    free = _meminfo("MemAvailable")
    limit = _cgroup_room()
    if limit is not None and (free is None or limit < free):
        return limit, "this host's cgroup memory limit, less what the group uses"
    return free, "MemAvailable of this host" if free is not None else ""


def _meminfo(field: str) -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_room() -> int | None:
    for limit_file, usage_file in ((f"{CGROUP_V2}/memory.max", f"{CGROUP_V2}/memory.current"),
                                   (f"{CGROUP_V1}/memory.limit_in_bytes", f"{CGROUP_V1}/memory.usage_in_bytes")):
        limit, usage = _read_int(limit_file), _read_int(usage_file)
        if limit is not None and limit < 1 << 60:  # "max" or v1's huge number: no limit
            return max(0, limit - (usage or 0))
    return None


def _read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"
