"""Where each parameter sits in ZeRO-1/2's flat fp32 partitions: DeepSpeed's layout, recomputed.

Mirrors deepspeed/runtime/zero/stage_1_and_2.py (DeepSpeedZeroOptimizer.__init__,
flatten_dense_tensors_aligned, get_data_parallel_partitions, state_dict) and the reader that
inverts it, deepspeed/utils/zero_to_fp32.py (_zero2_merge_trainable_params):

* a param group's parameters, in `param_shapes` order (the round-robin order the flat buffer
  uses), are laid end to end, each followed by its `param_alignment_paddings` entry;
* the whole is padded at the end to a multiple of 2 x dp (nccl_start_alignment_factor x the
  group's partition_count) and cut into dp equal partitions, rank r holding [r*size, (r+1)*size);
* each rank saves its fp32 partition without the end padding that falls in it (`group_paddings`
  of its shard): the last rank's saved partition is shorter when there is padding;
* `param_slice_mappings` of rank r names each parameter overlapping its partition with the
  overlap's length and where it starts inside the partition (a fragment_address).

ZeRO-3 keeps a per-parameter partition instead: every parameter is split into dp pieces of
ceil(numel / dp) elements (the last rank's piece padded), and rank r's flat group is its pieces
end to end, so its length is the sum of ceil(numel / dp) (zero_to_fp32's
zero3_partitioned_param_info).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

ALIGNMENT_FACTOR = 2  # DeepSpeedZeroOptimizer.nccl_start_alignment_factor


@dataclass(frozen=True)
class Param:
    name: str
    numel: int
    offset: int  # first element in the flat group


@dataclass(frozen=True)
class Piece:
    """Part of one parameter inside a partition: `count` elements from `param_offset` of the
    parameter, at `at` inside the partition."""
    param: Param
    param_offset: int
    at: int
    count: int


@dataclass
class GroupLayout:
    params: list[Param]
    used: int  # elements up to the end of the last parameter (with the per-parameter paddings)
    total: int  # the flat group's length, padded
    dp: int

    @property
    def partition_size(self) -> int:
        return self.total // self.dp

    def padding(self, rank: int) -> int:
        """The end padding inside rank's partition (the `group_paddings` entry of its shard)."""
        size = self.partition_size
        left = rank * size
        if self.used <= left:
            return size
        return max(0, left + size - self.used)

    def saved_numel(self, rank: int) -> int:
        return self.partition_size - self.padding(rank)

    def pieces(self, rank: int) -> list[Piece]:
        """The parameters' parts in rank's partition, in flat order (paddings left out)."""
        start = rank * self.partition_size
        end = start + self.saved_numel(rank)
        out = []
        for p in self.params:
            lo, hi = max(start, p.offset), min(end, p.offset + p.numel)
            if lo < hi:
                out.append(Piece(p, lo - p.offset, lo - start, hi - lo))
        return out

    def slice_mappings(self, rank: int) -> list[tuple[str, int, int]]:
        """(name, numel, start) as the rank's `param_slice_mappings` says them."""
        return [(piece.param.name, piece.count, piece.at) for piece in self.pieces(rank)]


def numel(shape) -> int:
    return math.prod(int(d) for d in shape) if isinstance(shape, (tuple, list)) else 0


def zero12_group(shapes: dict[str, tuple], dp: int, alignment_paddings: list[int] | None) -> GroupLayout:
    """One param group's layout for DeepSpeedZeroOptimizer (ZeRO-1 and 2, any precision)."""
    if alignment_paddings is not None and len(alignment_paddings) != len(shapes):
        raise ValueError(f"{len(alignment_paddings)} parameter alignment paddings for {len(shapes)} parameters")
    params, offset = [], 0
    for i, (name, shape) in enumerate(shapes.items()):
        n = numel(shape)
        params.append(Param(name, n, offset))
        offset += n + (alignment_paddings[i] if alignment_paddings else 0)
    alignment = ALIGNMENT_FACTOR * dp
    return GroupLayout(params, offset, alignment * math.ceil(offset / alignment) if offset else 0, dp)


def zero3_partition_numel(shapes: dict[str, tuple], dp: int) -> int:
    """Elements of one rank's ZeRO-3 fp32 flat groups together (all param groups)."""
    return sum(math.ceil(numel(shape) / dp) for shape in shapes.values())
