"""model: the parameter names and shapes the checkpoint saved vs the model the load builds (--model).

Saved: one model-states file's `param_shapes` (and `frozen_param_shapes`), over the module
state's tensor shapes (buffers; ZeRO-3 saves parameters empty), read by safe_pickle: no tensor
bytes. Expected: --model FILE (triage/probe/model_file.py: a JSON/YAML of names to shapes, a
torch state-dict file or a .safetensors header).

The two are compared by triage.analysis.state_dict.compare, the analysis classify applies to the
same differences in a log: a wrapper prefix on one side only (`module.` of DDP/DeepSpeed,
`_orig_mod.` of torch.compile, `base_model.model.` of PEFT, `model.` of a task head's base
model) is removed first and is its own signal; then renamed_module (the missing and unexpected
names pair up, same shapes, once one module path is swapped for another: `blocks.` saved,
`trunk.` built; a load with strict=False leaves those at their initial values without a word),
what the difference means (EXPLAINED: tp_ratio, zero3_placeholder and its side, vocab_resized,
buffers_only, tied_head_missing, adapter_only, adapter_shapes, adapter_keys, engine_keys), and
the plain facts: missing_keys (the model has names the checkpoint lacks), unexpected_keys (the
checkpoint has names the model lacks), shapes_differ. Without --model, torch's load error in the
log is checked instead (model_claims.py; a pipeline checkpoint's names and shapes from its layer
files), including adapter_only and partition_differs (a saved flat fp32 partition of another size
than the load's, on the saved dp). Inconclusive with neither.
"""

from __future__ import annotations

import shlex

from triage.analysis.state_dict import PREFIXES, compare
from triage.analysis.state_dict import module_renames  # noqa: F401 (the probe tests read it here)
from triage.probe.context import ProbeContext
from triage.probe.layout import first_model_file
from triage.probe.model_claims import EXPLAINED, check_claims, explaining
from triage.probe.model_file import saved_shapes
from triage.probe.safe_pickle import tensor_shapes
from triage.probe.result import ProbeResult, outcome

NAME = "model"
SIGNALS = tuple(s for _, s in PREFIXES) + ("missing_keys", "unexpected_keys", "shapes_differ", "renamed_module") \
    + EXPLAINED
CAP = 10  # names listed per kind of difference


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
    # a names-to-shapes list often holds parameters only: module-only entries (buffers) are context
    module_only = set(meta.module_shapes or {}) - set(meta.param_shapes or {}) - set(meta.frozen_param_shapes or {})
    diff = compare(saved, expected, optional=module_only if model.kind in ("json", "yaml") else ())
    missing, unexpected, differ, renames = diff.missing, diff.unexpected, diff.differ, diff.renames
    evidence: list[str] = []
    context = [f"saved: {len(saved)} names in {shard.name} ({source}); your model: {len(expected)} names "
               f"({model.kind} {model.path})"] + list(model.notes)
    signals: list[str] = []
    for prefix, signal, side in diff.removed:
        other = "model" if side == "checkpoint" else "checkpoint"
        signals.append(signal)
        evidence.append(f"the {side}'s names carry the `{prefix}` prefix, the {other}'s do not "
                        f"(e.g. {_example(saved if side == 'checkpoint' else expected, prefix)}); "
                        f"compared without it")
    if diff.skipped:
        context.append(_listed("saved module entries that are not parameters (buffers?), not in your file",
                               diff.skipped))
    if renames:
        signals.append("renamed_module")
        evidence[:0] = [f"`{old}.*` in the checkpoint is `{new}.*` in your model ({n} tensors, the same shapes): "
                        f"a renamed module; a load with strict=False (load_module_strict=False) leaves them at their "
                        f"initial values without a word. Rename `{old}.` to `{new}.` in the saved keys, or the "
                        f"attribute back" for old, new, n in renames]
    explained = explaining(diff.signals)
    signals += [s.name for s in explained]
    evidence += [f"{s.name}: {s.says}" for s in explained]
    if missing:
        signals.append("missing_keys")
        evidence.append(_listed("missing from the checkpoint (your model has them)", missing))
    if unexpected:
        signals.append("unexpected_keys")
        evidence.append(_listed("unexpected in the checkpoint (your model lacks them)", unexpected))
    if differ:
        signals.append("shapes_differ")
        shown = [f"{k} saved {list(a)} vs model {list(b)}" for k, (a, b) in diff.sizes.items()]
        evidence.append(_listed("differently shaped", shown))
    if not signals:
        context.insert(0, f"all {len(expected) - len(missing)} names and shapes match")
    command = (f"diff <(ds-triage inspect --shapes {ctx.q(ctx.ckpt.tag, shard.name)}) "
               f"<(ds-triage inspect --shapes {shlex.quote(str(model.path))})")
    return outcome(NAME, signals=signals, checked=list(SIGNALS), complete=True,
                   found="the model's parameter names or shapes differ from the checkpoint's",
                   clear="the checkpoint's parameter names and shapes match your model",
                   unknown="", evidence=evidence, context=context, command=command,
                   facts={"missing": missing, "unexpected": unexpected, "shapes_differ": differ,
                          "renamed": [{"checkpoint": old, "model": new, "tensors": n} for old, new, n in renames],
                          "prefixes": [{"prefix": p, "side": s} for p, _, s in diff.removed],
                          **{s.name: s.facts for s in explained}},
                   sources={"model": "--model"})


def _example(names, prefix: str) -> str:
    return next((k for k in names if k.startswith(prefix)), prefix)

