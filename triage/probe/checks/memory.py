"""memory: will the host hold what every rank reads while it loads?

Needed, per rank: the files DeepSpeed's load reads on that rank (ZeRO-0/1/2: the whole
mp_rank model-states file and the rank's own optimizer shard; ZeRO-3: the rank's own
zero_pp_rank model-states file and optimizer shard; pipeline: every layer file of its stage),
counted twice: torch.load holds the loaded copy while the engine already holds its own
parameters and optimizer state. Times the ranks on the host (--ranks-per-node, else the target
world size, else the saved one: one node). A rough estimate, said as such.

Available: --host-memory (the loading node, when it is not this one), else this host's
MemAvailable (/proc/meminfo), lowered by a cgroup memory limit (v2 memory.max or v1
limit_in_bytes, minus what the group already uses).

Confirmed (too_small) when the estimate exceeds what is available; refuted when it needs at most
half of it; in between, inconclusive (it may fit).
"""

from __future__ import annotations

import os

from triage.probe.context import ProbeContext
from triage.probe.result import ProbeResult, outcome

NAME = "memory"
CGROUP_V2 = "/sys/fs/cgroup"
CGROUP_V1 = "/sys/fs/cgroup/memory"
MARGIN = 2.0  # refuted only when the estimate is at most 1/MARGIN of what is available


def probe(ctx: ProbeContext) -> ProbeResult:
    layout, listing = ctx.layout(), ctx.listing
    if layout is None or listing is None:
        return ProbeResult(NAME, "inconclusive", "no readable tag to size", [], "")
    per_rank, read = _bytes_per_rank(ctx, layout)
    ranks, ranks_source = _ranks(ctx, layout)
    need = 2 * per_rank * ranks
    available, available_source = _available(ctx)
    command = f"du -ab {ctx.q(ctx.ckpt.tag)} | sort -n | tail; grep MemAvailable /proc/meminfo; " \
              "cat /sys/fs/cgroup/memory.max 2>/dev/null"
    context = [f"each rank reads about {_size(per_rank)} ({read}); x2 (the loaded copy beside the engine's own) "
               f"x {ranks} rank(s) on the host ({ranks_source}) = {_size(need)}",
               f"available: {_size(available)} ({available_source})" if available is not None else
               "available memory unknown: no /proc/meminfo and no --host-memory"]
    if available is None:
        return outcome(NAME, signals=[], checked=[], complete=False, found="", clear="",
                       unknown="cannot tell how much memory the host has", evidence=[], context=context,
                       command=command)
    signals = ["too_small"] if need > available else []
    evidence = [f"loading needs about {_size(need)}, the host has {_size(available)} available"] if signals else []
    fits = need * MARGIN <= available
    return outcome(NAME, signals=signals, checked=["too_small"] if fits or signals else [], complete=fits,
                   found="the load likely needs more memory than the host has",
                   clear=f"the load fits in memory ({_size(need)} of {_size(available)})",
                   unknown=f"the load may not fit: about {_size(need)} of {_size(available)} available",
                   evidence=evidence, context=context, command=command)


def _bytes_per_rank(ctx: ProbeContext, layout) -> tuple[int, str]:
    listing = ctx.listing

    def size(shard) -> int:
        try:
            return os.stat(ctx.shard_path(shard.name)).st_size
        except OSError:
            return 0

    models = listing.of("zero3_model") or listing.of("model")
    layers = listing.of("layer")
    optims = listing.of("optim")
    model = max(map(size, models), default=0)
    layer_bytes = sum(map(size, layers))
    optim = max(map(size, optims), default=0)
    parts = [f"a model-states file of {_size(model)}"] if model else []
    if layer_bytes:
        parts.append(f"{len(layers)} layer files of {_size(layer_bytes)}")
    if optim:
        parts.append(f"an optimizer shard of {_size(optim)}")
    return model + layer_bytes + optim, ", ".join(parts) or "nothing"


def _ranks(ctx: ProbeContext, layout) -> tuple[int, str]:
    if ctx.ranks_per_node:
        return ctx.ranks_per_node, "--ranks-per-node"
    if ctx.target.world_size:
        return ctx.target.world_size, f"world size {ctx.target.describe('world_size')}, one node"
    return layout.world_size or 1, "the saved world size, one node" if layout.world_size else "one"


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
