"""model: the parameter names and shapes the checkpoint saved vs the model the load builds (--model).

Saved: one model-states file's `param_shapes` (and `frozen_param_shapes`), over the module
state's tensor shapes (buffers; ZeRO-3 saves parameters empty), read by safe_pickle: no tensor
bytes. Expected: --model FILE (triage/probe/model_file.py: a JSON/YAML of names to shapes, a
torch state-dict file or a .safetensors header).

A wrapper prefix on one side only (`module.` of DDP/DeepSpeed, `_orig_mod.` of torch.compile,
`base_model.model.` of PEFT) is recognised first: the names are compared once it is removed and
the prefix is its own signal. Confirmed: prefix_module, prefix_orig_mod, prefix_peft,
missing_keys (the model has names the checkpoint lacks), unexpected_keys (the checkpoint has
names the model lacks), shapes_differ, renamed_module (the missing and unexpected names pair up,
same shapes, once one module path is swapped for another: `blocks.` saved, `trunk.` built; a load
with strict=False leaves those at their initial values without a word). Without --model, torch's
load error in the log is checked instead (model_claims.py; a pipeline checkpoint's names and shapes from its layer files),
including adapter_only and partition_differs (a saved flat fp32
partition of another size than the load's, on the saved dp). Inconclusive with neither.
"""

from __future__ import annotations

import shlex

from triage.probe.context import ProbeContext
from triage.probe.layout import first_model_file
from triage.probe.model_claims import check_claims
from triage.probe.model_file import saved_shapes
from triage.probe.safe_pickle import tensor_shapes
from triage.probe.result import ProbeResult, outcome

NAME = "model"
PREFIXES = (("module.", "prefix_module"), ("_orig_mod.", "prefix_orig_mod"), ("base_model.model.", "prefix_peft"))
SIGNALS = tuple(s for _, s in PREFIXES) + ("missing_keys", "unexpected_keys", "shapes_differ", "renamed_module")
CAP = 10  # names listed per kind of difference


def _strip(keys, prefix: str) -> dict[str, str]:
    """new name -> original name, `prefix` removed where present."""
    return {(k[len(prefix):] if k.startswith(prefix) else k): k for k in keys}


def align(saved: dict, expected: dict) -> tuple[dict, dict, list[tuple[str, str, str]], dict[str, str]]:
    """saved and expected renamed so that a one-sided wrapper prefix no longer differs.

    Returns the renamed dicts, the prefixes removed: (prefix, signal, side it was on), and the
    saved names' originals (renamed -> as saved)."""
    removed = []
    origin = {k: k for k in saved}
    for _ in range(len(PREFIXES)):  # e.g. `module._orig_mod.`: one prefix per round
        best = None
        overlap = len(saved.keys() & expected.keys())
        for prefix, signal in PREFIXES:
            for side in ("checkpoint", "model"):
                src = saved if side == "checkpoint" else expected
                if not any(k.startswith(prefix) for k in src):
                    continue
                renamed = _strip(src, prefix)
                if len(renamed) < len(src):
                    continue  # stripping would merge two names
                other = expected if side == "checkpoint" else saved
                gain = len(renamed.keys() & other.keys())
                if gain > overlap and (best is None or gain > best[0]):
                    best = (gain, prefix, signal, side, renamed)
        if best is None:
            break
        _, prefix, signal, side, renamed = best
        if side == "checkpoint":
            saved = {n: saved[o] for n, o in renamed.items()}
            origin = {n: origin[o] for n, o in renamed.items()}
        else:
            expected = {n: expected[o] for n, o in renamed.items()}
        removed.append((prefix, signal, side))
    return saved, expected, removed, origin


def _listed(what: str, names: list[str]) -> str:
    shown = ", ".join(names[:CAP])
    more = f" ... and {len(names) - CAP} more" if len(names) > CAP else ""
    return f"{what} ({len(names)}): {shown}{more}"


def _unknown(why: str, evidence: list[str] | None = None) -> ProbeResult:
    return outcome(NAME, signals=[], checked=[], complete=False, found="", clear="", unknown=why,
                   evidence=evidence or [], command="")


def _saved(ctx: ProbeContext):
    """(shard, meta, saved shapes, where they came from), or a ProbeResult saying why not."""
    listing = ctx.listing
    shard = first_model_file(listing) if listing is not None and listing.exists and not listing.error else None
    if shard is None:
        return _unknown("no model-states file to read the saved parameter shapes from")
    meta = ctx.meta(shard.name)
    saved, source = (None, "") if meta.error else saved_shapes(meta)
    if not saved and ctx.target.model is None:
        saved, source = _layer_shapes(ctx, listing)
    if not saved:
        return _unknown("the saved parameter shapes could not be read",
                        [f"{shard.name}: " + (meta.error or "no param_shapes and no module tensors")])
    return shard, meta, saved, source


def _layer_shapes(ctx: ProbeContext, listing) -> tuple[dict | None, str]:
    """A pipeline checkpoint keeps its weights in layer_XX-model_states.pt files (each a layer's own
    state dict), and torch's error from PipelineModule.load_state_dir names them without the layer:
    each name with every shape the layer files saved under it (claims are checked against any)."""
    shapes: dict[str, set] = {}
    files = listing.of("layer")
    for layer in files:
        meta = ctx.meta(layer.name)
        if not meta.error and isinstance(meta.graph, dict):
            for name, shape in tensor_shapes(meta.graph).items():
                shapes.setdefault(name, set()).add(shape)
    return (shapes or None), f"{len(files)} pipeline layer files"


def probe(ctx: ProbeContext) -> ProbeResult:
    model, claims = ctx.target.model, ctx.target.model_claims
    if model is None and not claims:
        return _unknown("no --model given to compare with")
    found = _saved(ctx)
    if isinstance(found, ProbeResult):
        return found
    shard, meta, saved, source = found
    if model is None:
        result = check_claims(ctx, claims, shard.name, saved, source, meta.module_keys)
        result.sources = {"model": f"torch's load error in the log, line {claims.line}"}
        return result
    expected = dict(model.shapes)
    module_only = set(meta.module_shapes or {}) - set(meta.param_shapes or {}) - set(meta.frozen_param_shapes or {})
    a_saved, a_expected, removed, origin = align(saved, expected)
    evidence: list[str] = []
    context = [f"saved: {len(saved)} names in {shard.name} ({source}); your model: {len(expected)} names "
               f"({model.kind} {model.path})"] + list(model.notes)
    signals: list[str] = []
    for prefix, signal, side in removed:
        other = "model" if side == "checkpoint" else "checkpoint"
        signals.append(signal)
        evidence.append(f"the {side}'s names carry the `{prefix}` prefix, the {other}'s do not "
                        f"(e.g. {_example(saved if side == 'checkpoint' else expected, prefix)}); "
                        f"compared without it")
    missing = sorted(a_expected.keys() - a_saved.keys())
    unexpected = sorted(a_saved.keys() - a_expected.keys())
    if model.kind in ("json", "yaml"):
        # a names-to-shapes list often holds parameters only: module-only entries (buffers) are context
        skipped = [k for k in unexpected if origin.get(k) in module_only]
        if skipped:
            unexpected = [k for k in unexpected if k not in skipped]
            context.append(_listed("saved module entries that are not parameters (buffers?), not in your file",
                                   skipped))
    differ = sorted(k for k in a_saved.keys() & a_expected.keys() if tuple(a_saved[k]) != tuple(a_expected[k]))
    renames = module_renames(missing, unexpected, a_expected, a_saved)
    if renames:
        signals.append("renamed_module")
        evidence[:0] = [f"`{old}.*` in the checkpoint is `{new}.*` in your model ({n} tensors, the same shapes): "
                        f"a renamed module; a load with strict=False (load_module_strict=False) leaves them at their "
                        f"initial values without a word. Rename `{old}.` to `{new}.` in the saved keys, or the "
                        f"attribute back" for old, new, n in renames]
    if missing:
        signals.append("missing_keys")
        evidence.append(_listed("missing from the checkpoint (your model has them)", missing))
    if unexpected:
        signals.append("unexpected_keys")
        evidence.append(_listed("unexpected in the checkpoint (your model lacks them)", unexpected))
    if differ:
        signals.append("shapes_differ")
        shown = [f"{k} saved {list(a_saved[k])} vs model {list(a_expected[k])}" for k in differ]
        evidence.append(_listed("differently shaped", shown))
    if not signals:
        context.insert(0, f"all {len(a_saved.keys() & a_expected.keys())} names and shapes match")
    command = (f"diff <(python -m triage.probe.model_file {ctx.q(ctx.ckpt.tag, shard.name)}) "
               f"<(python -m triage.probe.model_file {shlex.quote(str(model.path))})")
    return outcome(NAME, signals=signals, checked=list(SIGNALS), complete=True,
                   found="the model's parameter names or shapes differ from the checkpoint's",
                   clear="the checkpoint's parameter names and shapes match your model",
                   unknown="", evidence=evidence, context=context, command=command,
                   facts={"missing": missing, "unexpected": unexpected, "shapes_differ": differ,
                          "renamed": [{"checkpoint": old, "model": new, "tensors": n} for old, new, n in renames],
                          "prefixes": [{"prefix": p, "side": s} for p, _, s in removed]},
                   sources={"model": "--model"})


def module_renames(missing, unexpected, expected: dict, saved: dict) -> list[tuple[str, str, int]]:
    """(saved module path, model module path, tensors) for the renames that pair unexpected names with
    missing ones: the same rest of the name and shape once one path is swapped for the other. The
    pairing covering most tensors first; a rename must cover at least two (one pair is a coincidence)."""
    by_rest: dict[str, list[str]] = {}
    for name in missing:
        parts = name.split(".")
        for k in range(1, len(parts)):
            by_rest.setdefault(".".join(parts[k:]), []).append(".".join(parts[:k]))
    votes: dict[tuple[str, str], set[str]] = {}
    for name in unexpected:
        parts = name.split(".")
        for k in range(1, len(parts)):
            old, rest = ".".join(parts[:k]), ".".join(parts[k:])
            for new in by_rest.get(rest, ()):
                if new != old and tuple(saved[name]) == tuple(expected[f"{new}.{rest}"]):
                    votes.setdefault((old, new), set()).add(rest)
    renames, taken_old, taken_new = [], set(), set()
    for (old, new), rests in sorted(votes.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        olds, news = {f"{old}.{r}" for r in rests} - taken_old, {f"{new}.{r}" for r in rests} - taken_new
        if min(len(olds), len(news)) >= 2:
            renames.append((old, new, min(len(olds), len(news))))
            taken_old |= olds
            taken_new |= news
    return renames


def _example(names, prefix: str) -> str:
    return next((k for k in names if k.startswith(prefix)), prefix)

