"""consistency (--deep only): do the tag's shards belong together? What DeepSpeed loads without a word.

A ZeRO-1/2 load hands each rank the optimizer shard named after it and copies that shard's fp32
master partition into the rank's weights: nothing checks that the partition is the rank's own
or of the same save. Two shards exchanged, or one copied in from another save, load silently
and every step after that trains from the wrong master weights. This probe reads the tensor
data (deep_scan: one streaming pass, through the safe reader's metadata, never a pickle global):

* each rank's fp32 master partition against its slice of the module weights (flat_layout:
  DeepSpeed's own layout recomputed from `param_shapes`): bit-exact in fp32, within the weights'
  rounding in bf16/fp16 (tolerance.py); a partition that matches another rank's slice is that
  rank's (shard_swapped), one that matches none is another save's (master_differs);
* whose `param_slice_mappings` each shard holds (shard_swapped);
* each partition's size against what `param_shapes` gives its rank (partition_size);
* the optimizer's `step` in every shard: each counter equal across the ranks that keep it, like
  with like (per parameter state, per param group: DeepSpeed's FusedAdam keeps both, its group one
  stays 0; a rank keeps none for a partition without optimizer state; SGD keeps none at all), and
  the count never more than the engine's `global_steps` minus `skipped_steps` in the model states
  (step_differs). Fewer is no finding: a resume with load_optimizer_states=False restarts the
  optimizer's count, not the engine's. tests/test_probe_healthy_optimizers.py holds a healthy real
  save of every optimizer DeepSpeed checkpoints, on ZeRO-1, 2 and 3.

ZeRO-3 saves no module weights beside its partitions: sizes and steps only (inconclusive about
values). Without --deep: inconclusive.
"""

from __future__ import annotations

import shlex

from triage.probe import deep_scan
from triage.probe.context import ProbeContext
from triage.probe.result import ProbeResult, outcome
from triage.probe.tolerance import describe

NAME = "consistency"
SIGNALS = ("shard_swapped", "master_differs", "partition_size", "step_differs")
FOUND = "the tag's shards do not belong together; DeepSpeed would load them without a word"
SHOWN = 3  # findings of one kind shown in full; the others are named on one line


def probe(ctx: ProbeContext) -> ProbeResult:
    if not ctx.deep:
        return outcome(NAME, signals=[], checked=[], complete=False, found="", clear="",
                       unknown="not run: --deep compares each rank's master partition with the module weights",
                       evidence=[], command="")
    scan = deep_scan.scan(ctx)
    found = _Found(ctx, scan)
    found.sizes()
    found.owners()
    found.steps()
    context = found.context + [f"{name}: not read ({why})" for name, why in scan.unreadable.items()] + scan.notes
    if scan.compared:
        context.append(f"compared: {scan.master_dtype} master partitions with {scan.weights_dtype} module weights, "
                       f"{describe(scan.master_dtype, scan.weights_dtype)}")
    context.append(f"read {scan.bytes_read / 2**20:,.1f} MiB in {scan.seconds:.2f} s (each byte once, CRC-32 "
                   "of every record checked on the way)")
    complete = scan.compared and not scan.unreadable and not any(r.error for r in scan.ranks)
    unknown = "; ".join(scan.notes) or "not every shard could be compared"
    return outcome(NAME, signals=found.signals, checked=found.checked, complete=complete, found=FOUND,
                   clear="every rank's master partition matches its slice of the module weights; sizes and steps agree",
                   unknown=unknown, evidence=found.evidence, context=context,
                   command=f"ds-triage inspect --ranks {ctx.q(ctx.ckpt.tag or '')}",
                   facts={"weights_dtype": scan.weights_dtype, "master_dtype": scan.master_dtype,
                          "bytes_read": scan.bytes_read, "seconds": round(scan.seconds, 3)})


class _Found:
    def __init__(self, ctx: ProbeContext, scan: deep_scan.Scan):
        self.ctx, self.scan = ctx, scan
        self.signals: list[str] = []
        self.checked: list[str] = []
        self.evidence: list[str] = []
        self.context: list[str] = []
        self.explained: set[str] = set()  # files an earlier finding already accounts for
        self._per_file: dict[str, list[str]] = {}
        self._fold_at: dict[str, int] = {}
        self._good_tags: list[str] | None = None  # other tags whose step counters agree (read once)

    def _found(self, signal: str, text: str, file: str | None = None) -> None:
        """A finding; per-file ones past SHOWN of a signal are folded into one line (64 ranks, 64 lines)."""
        self.signals.append(signal)
        if file is None:
            self.evidence.append(text)
            return
        self._per_file.setdefault(signal, []).append(file)
        count = len(self._per_file[signal])
        if count <= SHOWN:
            self.evidence.append(text)
        elif count == SHOWN + 1:
            self.evidence.append("")
            self._fold_at[signal] = len(self.evidence) - 1
        if count > SHOWN:
            more = self._per_file[signal][SHOWN:]
            names = ", ".join(more[:8]) + (", ..." if len(more) > 8 else "")
            self.evidence[self._fold_at[signal]] = f"and {len(more)} more shard(s) alike ({signal}): {names}"

    def sizes(self) -> None:
        ranks = [r for r in self.scan.ranks if not r.error and r.expected]
        if not ranks:
            return
        self.checked.append("partition_size")
        for r in ranks:
            if r.saved != r.expected:
                other = next((s for s in r.size_of if s is not None and s != r.rank), None)
                whose = f" (rank {other}'s size)" if other is not None else ""
                self._found("partition_size", f"{r.file}: fp32 partition of {_n(r.saved)} elements{whose}; the "
                            f"param_shapes of the model states make rank {r.rank}'s {_n(r.expected)}", r.file)

    def owners(self) -> None:
        compared = [r for r in self.scan.ranks if r.tally is not None]
        if not compared or len(compared) != len(self.scan.ranks):
            return
        self.checked += ["shard_swapped", "master_differs"]
        held = {}
        for r in compared:
            # the values decide; the slice mappings only when the values differ from the rank's own slice too
            owner = r.holds if r.holds is not None else \
                r.mapping_rank if r.tally.differ and r.mapping_rank not in (None, r.rank) else None
            if owner is not None and owner != r.rank:
                held[(r.mp, r.rank)] = owner
        by_key = {(r.mp, r.rank): r for r in compared}
        moves = {by_key[key].file: by_key[(key[0], owner)].file for key, owner in held.items()
                 if (key[0], owner) in by_key}
        if moves and len(moves) == len(held) and set(moves) == set(moves.values()):  # renaming puts each back
            self._exchanged(moves, by_key, held)
            return self._other_saves(compared)
        for key, owner in held.items():
            r = by_key[key]
            self.explained.add(r.file)
            self._found("shard_swapped", f"{r.file} holds rank {owner}'s fp32 master partition, not rank "
                        f"{r.rank}'s ({self._how(r, owner)}). Fix: put rank {r.rank}'s own shard back from the save "
                        "that wrote this tag", r.file)
        self._other_saves(compared)

    def _exchanged(self, moves: dict[str, str], by_key, held) -> None:
        files = {r.file: r for r in by_key.values()}
        first = files[next(iter(moves))]
        owner = held[(first.mp, first.rank)]
        how = self._how(first, owner)
        self.explained |= set(moves)
        if len(moves) == 2:
            a, b = moves
            text = (f"{a} holds rank {owner}'s fp32 master partition and {b} rank {first.rank}'s: the two files were "
                    f"exchanged, and each rank would resume from the other's master weights ({how}). Fix: swap them "
                    f"back: {self._renames(moves)}")
        else:
            each = ", ".join(f"{f} rank {held[(files[f].mp, files[f].rank)]}'s" for f in moves)
            text = (f"{len(moves)} optimizer shards hold other ranks' fp32 master partitions ({each}): the files were "
                    f"renamed in a cycle, and each of those ranks would resume from another's master weights (the "
                    f"first: {how}). Fix: rename them back: {self._renames(moves)}")
        self._found("shard_swapped", text)

    def _other_saves(self, compared) -> None:
        for r in compared:
            if r.tally.differ and r.file not in self.explained and r.holds is None:
                self.explained.add(r.file)
                self._found("master_differs", f"{r.file}: {r.tally.differ:,} of {r.tally.compared:,} values of its fp32 "
                            f"master partition differ from rank {r.rank}'s slice of the module weights "
                            f"({self._beyond()}; max |diff| {r.tally.max_diff:.3g}, first at "
                            f"{r.first_at}), and they match no rank's slice: {self._why(r)}", r.file)
        if not any(s in self.signals for s in ("shard_swapped", "master_differs")):
            self.context.append(f"{len(compared)} master partition(s) each match their own slice of the module weights")

    def _beyond(self) -> str:
        if self.scan.master_dtype == self.scan.weights_dtype:
            return "the same dtype: they must be equal bit for bit"
        return f"beyond {self.scan.weights_dtype} rounding"

    def _why(self, r) -> str:
        if self.scan.crc.get(r.file):
            return ("the file is damaged (its CRC-32 fails too: bit rot or a bad copy, see integrity). Fix: restore "
                    "it from a good copy of this tag")
        if r.tally.differ * 2 < r.tally.compared:
            return ("part of it was changed after the save (its CRC-32 holds: rewritten, not damaged in place). "
                    f"Fix: {self._other_save_fix(r)}")
        return f"a partition of another save, not the one these weights were saved from. Fix: {self._other_save_fix(r)}"

    def _how(self, r, owner: int) -> str:
        parts = []
        if r.mapping_rank == owner:
            parts.append(f"its param_slice_mappings are rank {owner}'s")
        if r.holds == owner:
            parts.append(f"its values are those of the module weights' slice of rank {owner}, "
                         + ("bit-exact" if self.scan.master_dtype == self.scan.weights_dtype else
                            f"within {self.scan.weights_dtype} rounding"))
        if r.tally.differ:
            parts.append(f"against rank {r.rank}'s slice {r.tally.differ:,} of {r.tally.compared:,} values differ")
        return "; ".join(parts)

    def _renames(self, moves: dict[str, str]) -> str:
        """Shell commands that give each file (key) the name of the rank whose partition it holds (value)."""
        q = shlex.quote
        steps = [f"mv {q(f)} {q(f + '.swap')}" for f in moves] + [f"mv {q(f + '.swap')} {q(t)}" for f, t in moves.items()]
        return f"cd {self.ctx.q(self.ctx.ckpt.tag)} && " + " && ".join(steps)

    def _other_save_fix(self, r) -> str:
        count = _count(r.steps)
        if self._good_tags is None:
            self._good_tags = _agreeing_tags(self.ctx)
        good = self._good_tags
        text = f"restore {r.file} of {self.ctx.ckpt.tag} from the save that wrote the rest of this tag"
        if count is not None and f"global_step{count}" in self.ctx.ckpt.tags:
            text += f" (its step {count} is global_step{count}'s)"
        if good:
            text += f", or resume from {good[0]} (tag={good[0]!r}), whose step counters agree"
        return text

    def steps(self) -> None:
        """Like with like: each counter (per parameter, per param group) across the ranks that keep
        it; a rank keeps none for a group whose partition is empty or frozen (no grad, no state), and
        FusedAdam's per-group step stays 0 beside its per-parameter one."""
        ranks = [r for r in self.scan.ranks if not r.error]
        kept = [r for r in ranks if r.steps]
        said = ", ".join(f"global_steps {g}" + (f" ({k} skipped)" if k else "") + f" in {f}"
                         for f, (g, k) in self.scan.model_steps.items())
        if len({g for g, _ in self.scan.model_steps.values()}) > 1:
            self.checked.append("step_differs")
            self._found("step_differs", f"the model-states files disagree on global_steps ({said}): files of "
                        "different saves")
        if not kept:
            if ranks:
                self.context.append(f"no step counter in the optimizer shards (the optimizer keeps none, e.g. SGD): "
                                    f"steps not compared ({said})")
            return
        self.checked.append("step_differs")
        if len(kept) < len(ranks):
            self.context.append(f"{len(ranks) - len(kept)} shard(s) keep no step counter (no optimizer state for "
                                "their partition): steps compared across the others")
        mixed = False
        for counter in sorted({k for r in kept for k, _ in r.steps}):
            values = {r.file: sorted({_num(v) for k, v in r.steps if k == counter}) for r in kept}
            values = {f: vs for f, vs in values.items() if vs}
            if len({tuple(vs) for vs in values.values()}) > 1:
                mixed = True
                self._differ(COUNTERS[counter], values, said)
        if mixed:
            return
        count = max(_count(r.steps) for r in kept)
        engine = {g - k for g, k in self.scan.model_steps.values() if g is not None}
        if engine and count > max(engine):
            self._found("step_differs", f"every optimizer shard records step {count}, more than the engine's "
                        f"{max(engine)} ({said}): the optimizer shards are from a later save than the model states")
        elif engine and count < min(engine):
            self.context.append(f"every optimizer shard records step {count}, the engine {min(engine)} ({said}): "
                                "the optimizer state restarted since (a resume with load_optimizer_states=False), "
                                "not a mix of saves")
        else:
            self.context.append(f"optimizer step {count} in every shard ({said})")

    def _differ(self, counter: str, values: dict[str, list], said: str) -> None:
        sets = [tuple(vs) for vs in values.values()]
        common = max(sets, key=sets.count)
        odd = [f"{f} (step {', '.join(map(str, vs))})" for f, vs in values.items() if tuple(vs) != common]
        self._found("step_differs", f"the optimizer shards record different {counter} steps: step "
                    f"{', '.join(map(str, common))} in most, but {'; '.join(odd)}; the model states record {said}: "
                    "files of different saves"
                    + ("" if all(f in self.explained for f, vs in values.items() if tuple(vs) != common)
                       else ". Fix: restore those shards from the save that wrote this tag"))


COUNTERS = {"param": "per-parameter", "group": "per-param-group"}


def _count(steps: list[tuple[str, object]]):
    """The optimizer's step count in one shard: its highest counter (FusedAdam's per-group step
    stays 0 while the per-parameter one counts); None when it keeps none."""
    return max((_num(v) for _, v in steps), default=None)


def _n(values: list[int]) -> str:
    return " + ".join(f"{v:,}" for v in values)


def _num(value):
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _agreeing_tags(ctx: ProbeContext, most: int = 8) -> list[str]:
    """Of the `most` newest other tags, those whose files all record one step: by their counters only
    (their tensor data is not compared)."""
    from triage.probe.safe_pickle import read_shard
    from triage.probe.tensor_data import Archive, TensorError
    from triage.probe.zero_state import model_state, optim_state

    out = []
    for tag in [t for t in reversed(ctx.ckpt.tags) if t != ctx.ckpt.tag][:most]:
        listing = ctx.ckpt.listing(tag)
        if listing is None or listing.error:
            continue
        counts = set()
        try:
            for shard in listing.of("model", "zero3_model", "optim"):
                meta = read_shard(f"{listing.path}/{shard.name}")
                if meta.error:
                    raise TensorError(meta.error)
                if shard.kind == "optim":
                    state = optim_state(meta.graph)
                    with Archive(f"{listing.path}/{shard.name}") as archive:
                        count = _count(deep_scan.steps_of(archive, state)) if state else None
                    counts |= {count} if count is not None else set()
                else:
                    states = model_state(meta.graph)
                    counts.add(states.global_steps - states.skipped_steps if states and states.global_steps else None)
        except (OSError, ValueError, KeyError):
            continue
        if len(counts) == 1 and None not in counts:
            out.append(tag)
    return out


def main(argv: list[str] | None = None) -> int:
    """`ds-triage inspect --ranks TAG_DIR`: each rank's shard as the check sees it."""
    import sys

    path = (argv if argv is not None else sys.argv[1:] or ["."])[0]
    ctx = ProbeContext.for_path(path, deep=True)
    scan = deep_scan.scan(ctx)
    print(f"{'file':48s} {'saved':>10s} {'expected':>10s} {'mappings':>8s} {'differ':>12s} {'holds':>5s} step")
    for r in scan.ranks:
        differ = f"{r.tally.differ}/{r.tally.compared}" if r.tally else "-"
        print(f"{r.file:48s} {_n(r.saved):>10s} {_n(r.expected):>10s} "
              f"{'-' if r.mapping_rank is None else r.mapping_rank:>8} {differ:>12s} "
              f"{'-' if r.holds is None else r.holds:>5} {', '.join(f'{k} {_num(v)}' for k, v in r.steps)}"
              + (f"  ({r.error})" if r.error else ""))
    for name, (steps, skipped) in scan.model_steps.items():
        print(f"{name}: global_steps {steps}, skipped_steps {skipped}")
    for note in scan.notes:
        print(f"note: {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

