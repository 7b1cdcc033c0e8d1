"""--deep: one streaming pass over a tag's shards, for the consistency probe and integrity's CRC.

ZeRO-1/2: for each model-parallel rank, its model-states file stays open while each data-parallel
rank's optimizer shard is read front to back. The shard's fp32 master partition is compared, piece
by piece (flat_layout: DeepSpeed's own layout recomputed from `param_shapes`), with the same
elements of the module's weights (tolerance: within the weights' rounding), in pieces of at most
tensor_data.CHUNK bytes. The ranks' slices follow each other in the flat order, so the module's
weights are read in order, once; last, every record's remaining bytes are read for its CRC-32
(Archive.finish). So each byte is read once, and peak memory is a few chunks whatever the shard size.

ZeRO-3 saves no module weights beside its partitions (the model-states files hold empty tensors):
its partition sizes and step counters are checked, its values cannot be compared here. Other files
(ZeRO-0, pipeline layers, MoE experts) are read for their CRC only.
"""

from __future__ import annotations

import time
import zipfile
from dataclasses import dataclass, field

from triage.probe.flat_layout import GroupLayout, zero12_group, zero3_partition_numel
from triage.probe.safe_pickle import ITEM_SIZE
from triage.probe.tensor_data import CHUNK, Archive, TensorError
from triage.probe.tolerance import FLOATS, Tally
from triage.probe.zero_state import ModelState, OptimState, model_state, optim_state

HEAD = 64  # elements kept from each partition and each module slice: whose partition a shard holds
MAX_RANKS_MATCHED = 4096  # slice mappings matched against every rank's layout up to this many ranks
READ_ERRORS = (OSError, TensorError, zipfile.BadZipFile, ValueError, KeyError, IndexError, TypeError, OverflowError)
# ImportError: numpy (the probe extra) missing, needed once values differ or are bf16/fp16
COMPARE_ERRORS = (TensorError, ValueError, KeyError, IndexError, TypeError, OverflowError, ImportError)


@dataclass
class RankFacts:
    """One optimizer shard, as the consistency check saw it."""
    file: str
    mp: int
    rank: int
    saved: list[int] = field(default_factory=list)  # saved partition numel per group
    expected: list[int] = field(default_factory=list)  # what param_shapes make it for this rank
    size_of: list[int | None] = field(default_factory=list)  # the rank whose partition has the saved size
    mapping_rank: int | None = None  # whose param_slice_mappings it holds (None: not saved / no rank's)
    tally: Tally | None = None  # its master partition against the module weights' slice of its rank
    head: tuple = ()  # (bytes, dtype): the first HEAD master values compared
    first_at: str | None = None  # where the first difference is: "blocks.2.weight[516]"
    holds: int | None = None  # the rank whose module slice its values match, when not its own
    steps: list = field(default_factory=list)  # (counter, number): zero_state.OptimState.steps
    error: str | None = None


@dataclass
class Scan:
    stage: int | None = None
    kind: str | None = None
    master_dtype: str | None = None
    weights_dtype: str | None = None
    ranks: list[RankFacts] = field(default_factory=list)
    model_steps: dict[str, tuple[int | None, int]] = field(default_factory=dict)  # file -> (global, skipped)
    slice_heads: dict[tuple[int, int], tuple] = field(default_factory=dict)  # (mp, rank) -> (weights, dtype)
    crc: dict[str, str | None] = field(default_factory=dict)  # file name -> first CRC problem
    unreadable: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    compared: bool = False  # master partitions compared with the module weights
    bytes_read: int = 0
    seconds: float = 0.0


def scan(ctx) -> Scan:
    """The pass, once per probe context (integrity and consistency both ask for it)."""
    if ctx.deep_scan is None:
        start = time.perf_counter()
        ctx.deep_scan = _run(ctx)
        ctx.deep_scan.seconds = time.perf_counter() - start
    return ctx.deep_scan


def _run(ctx) -> Scan:
    result = Scan()
    listing = ctx.listing
    if listing is None or not listing.exists or listing.error:
        result.notes.append("no tag dir could be listed")
        return result
    layout = ctx.layout()
    result.stage = layout.stage if layout else None
    done: set[str] = set()
    if layout and (layout.names.layers or layout.names.experts):
        result.notes.append("pipeline or MoE layout: master partitions not compared (their weights live in "
                            "layer/expert files); read for CRC only")
    elif result.stage in (1, 2):
        _zero12(ctx, listing, result, done)
    elif result.stage == 3:
        _zero3(ctx, listing, result, done)
    elif result.stage == 0:
        result.notes.append("ZeRO-0: no fp32 master partitions apart from the weights; read for CRC only")
    for shard in listing.shards:
        if shard.name not in done:
            _crc_only(ctx, shard.name, result)
    return result


def steps_of(archive: Archive, state: OptimState) -> list[tuple[str, object]]:
    """The shard's recorded optimizer steps, (counter, number) (a tensor `step` read from its record)."""
    return [(k, archive.scalar(s) if not isinstance(s, (int, float)) else s) for k, s in state.steps]


def _crc_only(ctx, name: str, result: Scan) -> None:
    try:
        with Archive(ctx.shard_path(name)) as archive:
            result.crc[name] = archive.finish()
            result.bytes_read += archive.bytes_read
    except READ_ERRORS as exc:
        result.unreadable[name] = f"{type(exc).__name__}: {exc}"[:300]


# ---------------------------------------------------------------- ZeRO-1/2

def _zero12(ctx, listing, result: Scan, done: set[str]) -> None:
    for model in listing.of("model"):
        mp = model.mp or 0
        meta = ctx.meta(model.name)
        states = model_state(meta.graph) if not meta.error else None
        if states is None or meta.param_group_shapes is None:
            result.notes.append(f"{model.name}: no module or param_shapes to compare with")
            continue
        result.model_steps[model.name] = (states.global_steps, states.skipped_steps)
        shards = sorted((s for s in listing.of("optim") if (s.mp or 0) == mp), key=lambda s: s.dp or 0)
        try:
            with Archive(ctx.shard_path(model.name)) as weights:
                for shard in shards:
                    done.add(shard.name)
                    result.ranks.append(_zero12_rank(ctx, shard, weights, states, meta.param_group_shapes, result))
                result.crc[model.name] = weights.finish()
                result.bytes_read += weights.bytes_read
                done.add(model.name)
        except READ_ERRORS as exc:
            result.unreadable[model.name] = f"{type(exc).__name__}: {exc}"[:300]
    result.compared = any(r.tally is not None for r in result.ranks)
    try:
        _identify(result)
    except ImportError as exc:
        result.notes.append(f"whose partition each differing shard holds: not told ({exc})")


def _zero12_rank(ctx, shard, weights: Archive, states: ModelState, group_shapes, result: Scan) -> RankFacts:
    facts = RankFacts(shard.name, shard.mp or 0, shard.dp or 0)
    meta = ctx.meta(shard.name)
    state = optim_state(meta.graph) if not meta.error else None
    if state is None or state.kind != "zero12":
        facts.error = meta.error or ("a BF16_Optimizer shard: its layout is not compared here" if state
                                     else "no fp32 master partitions in it")
        _crc_only(ctx, shard.name, result)
        return facts
    result.kind = "zero12"
    try:
        with Archive(ctx.shard_path(shard.name)) as archive:
            try:
                facts.steps = steps_of(archive, state)
                if len(state.partitions) != len(group_shapes):
                    facts.error = (f"{len(state.partitions)} fp32 partition group(s), the model states' param_shapes "
                                   f"{len(group_shapes)}")
                else:
                    _compare_groups(facts, state, group_shapes, archive, weights, states, result)
            except COMPARE_ERRORS as exc:  # the data is not as described: not compared, still CRC-checked
                facts.error = f"not compared: {type(exc).__name__}: {exc}"[:300]
                facts.tally = None
            result.crc[shard.name] = archive.finish()
            result.bytes_read += archive.bytes_read
    except READ_ERRORS as exc:
        facts.error = f"{type(exc).__name__}: {exc}"[:300]
        result.unreadable[shard.name] = facts.error
    return facts


def _compare_groups(facts: RankFacts, state: OptimState, group_shapes, archive: Archive, weights: Archive,
                    states: ModelState, result: Scan) -> None:
    mappings = []
    for g, (part, shapes) in enumerate(zip(state.partitions, group_shapes)):
        dp = state.partition_count[g] if g < len(state.partition_count) else None
        paddings = state.alignment_paddings[g] if state.alignment_paddings and g < len(state.alignment_paddings) \
            else None
        if not dp or facts.rank >= dp:
            facts.error = f"partition_count {dp} does not hold rank {facts.rank}"
            return
        layout = zero12_group(shapes, dp, paddings)
        facts.saved.append(part.numel)
        facts.expected.append(layout.saved_numel(facts.rank))
        facts.size_of.append(next((r for r in _ranks_near(facts.rank, dp)
                                   if layout.saved_numel(r) == part.numel), None))
        if state.slice_mappings is not None and g < len(state.slice_mappings):
            mappings.append(_mapping_rank(layout, state.slice_mappings[g], facts.rank))
        _compare(facts, layout, part, archive, weights, states, result)
    if mappings and all(m == mappings[0] for m in mappings):
        facts.mapping_rank = mappings[0]


def _ranks_near(rank: int, dp: int):
    """The rank itself, then the others (at most MAX_RANKS_MATCHED: partition_count comes from the file)."""
    yield rank
    yield from (r for r in range(min(dp, MAX_RANKS_MATCHED)) if r != rank)


def _mapping_rank(layout: GroupLayout, saved: list[tuple[str, int, int]], own: int) -> int | None:
    """Whose param_slice_mappings these are: only the ranks whose partition holds the first one's
    parameter are candidates (the layout of every rank is never built)."""
    if layout.slice_mappings(own) == saved:
        return own
    param = next((p for p in layout.params if saved and p.name == saved[0][0]), None)
    size = layout.partition_size
    if param is None or not size:
        return None
    first, last = param.offset // size, (param.offset + max(param.numel, 1) - 1) // size
    return next((r for r in range(first, min(last + 1, layout.dp)) if layout.slice_mappings(r) == saved), None)


def _compare(facts: RankFacts, layout: GroupLayout, part, archive: Archive, weights: Archive,
             states: ModelState, result: Scan) -> None:
    """The rank's master partition against its slice of the module weights, piece by piece."""
    span = archive.span(part)
    if span.dtype not in FLOATS:
        raise TensorError(f"master partition of dtype {span.dtype}")
    result.master_dtype = span.dtype
    cursor = archive.cursor(span)
    tally = facts.tally or Tally()
    head_key = (facts.mp, facts.rank)
    per = max(1, CHUNK // span.itemsize)
    before = tally.compared
    for piece in layout.pieces(facts.rank):
        if piece.at >= span.numel:
            break
        tensor = states.module.get(piece.param.name)
        if tensor is None:
            raise TensorError(f"the module has no tensor {piece.param.name} that param_shapes names")
        wspan = weights.span(tensor)
        if wspan.numel != piece.param.numel or wspan.dtype not in FLOATS:
            raise TensorError(f"module tensor {piece.param.name}: {wspan.numel} x {wspan.dtype}, param_shapes "
                              f"says {piece.param.numel} elements")
        result.weights_dtype = wspan.dtype
        cursor.skip(piece.at - cursor.pos)
        count, done = min(piece.count, span.numel - piece.at), 0
        while done < count:
            k = min(per, count - done)
            master = cursor.take(k)
            offset = wspan.start + (piece.param_offset + done) * wspan.itemsize
            values = weights.read(wspan.record, offset, k * wspan.itemsize)
            tally.add(master, span.dtype, values, wspan.dtype)
            if head_key not in result.slice_heads:  # the first elements compared: whose partition is it?
                facts.head = (master[:HEAD * span.itemsize], span.dtype)
                result.slice_heads[head_key] = (values[:HEAD * wspan.itemsize], wspan.dtype)
            if tally.first is not None and facts.first_at is None:
                facts.first_at = f"{piece.param.name}[{piece.param_offset + done + tally.first - before}]"
            done += k
            before = tally.compared
    facts.tally = tally


def _identify(result: Scan) -> None:
    """For each rank whose values differ from its own slice: the rank whose slice they match."""
    for facts in result.ranks:
        if facts.tally is None or not facts.tally.differ or not facts.head:
            continue
        master, master_dtype = facts.head
        n = len(master) // ITEM_SIZE[master_dtype]
        for (mp, rank), (head, dtype) in result.slice_heads.items():
            if mp != facts.mp or rank == facts.rank or len(head) < n * ITEM_SIZE[dtype]:
                continue
            probe = Tally()
            probe.add(master, master_dtype, head[:n * ITEM_SIZE[dtype]], dtype)
            if not probe.differ:
                facts.holds = rank
                break


# ---------------------------------------------------------------- ZeRO-3

def _zero3(ctx, listing, result: Scan, done: set[str]) -> None:
    result.kind = "zero3"
    result.notes.append("ZeRO-3 saves no module weights beside its partitions (the model-states files hold empty "
                        "tensors): partition sizes and step counters checked, values not compared")
    for model in listing.of("zero3_model"):
        meta = ctx.meta(model.name)
        states = model_state(meta.graph) if not meta.error else None
        if states is not None:
            result.model_steps[model.name] = (states.global_steps, states.skipped_steps)
    shapes = {}
    for model in listing.of("zero3_model"):
        meta = ctx.meta(model.name)
        if not meta.error and meta.param_shapes:
            shapes = meta.param_shapes
            break
    for shard in sorted(listing.of("optim"), key=lambda s: ((s.mp or 0), s.dp or 0)):
        facts = RankFacts(shard.name, shard.mp or 0, shard.dp or 0)
        meta = ctx.meta(shard.name)
        state = optim_state(meta.graph) if not meta.error else None
        if state is None or state.kind != "zero3":
            facts.error = meta.error or "no ZeRO-3 fp32 flat groups in it"
            result.ranks.append(facts)
            continue
        done.add(shard.name)
        dp = state.partition_count[0] if state.partition_count else None
        facts.saved = [sum(p.numel for p in state.partitions)]
        facts.expected = [zero3_partition_numel(shapes, dp)] if shapes and dp else []
        try:
            with Archive(ctx.shard_path(shard.name)) as archive:
                facts.steps = steps_of(archive, state)
                result.crc[shard.name] = archive.finish()
                result.bytes_read += archive.bytes_read
        except READ_ERRORS as exc:
            facts.error = f"{type(exc).__name__}: {exc}"[:300]
            result.unreadable[shard.name] = facts.error
        result.ranks.append(facts)

