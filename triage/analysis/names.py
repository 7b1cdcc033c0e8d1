"""Which names of two state dicts are the same tensor under another name: a wrapper prefix one side
carries (align), a module moved under another path (module_renames). Read by the state-dict
analysis (triage/analysis/state_dict.py), for a log's key lists and for the probe's two state dicts
alike. Standard library only: classify imports it."""

from __future__ import annotations

# (prefix, signal); torch.compile inside DDP gives module._orig_mod.: one prefix a round (align)
PREFIXES = (("module.", "prefix_module"), ("_orig_mod.", "prefix_orig_mod"), ("base_model.model.", "prefix_peft"),
            ("model.", "prefix_model"))


def _strip(keys, prefix: str) -> dict[str, str]:
    """new name -> original name, `prefix` removed where present."""
    return {(k[len(prefix):] if k.startswith(prefix) else k): k for k in keys}


def align(saved: dict, expected: dict) -> tuple[dict, dict, list[tuple[str, str, str]], dict[str, str]]:
    """saved and expected renamed so that a one-sided wrapper prefix no longer differs.

    Returns the renamed dicts, the prefixes removed: (prefix, signal, side it was on), and the
    saved names' originals (renamed -> as saved). A prefix is removed only when it makes more
    names meet, and never when removing it would merge two names."""
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


def module_renames(missing, unexpected, expected: dict | None = None, saved: dict | None = None
                   ) -> list[tuple[str, str, int]]:
    """(saved module path, model module path, tensors) for the renames that pair unexpected names with
    missing ones: the same rest of the name (and the same shape, when shapes are known) once one path
    is swapped for the other. The pairing covering most tensors first; a rename must cover at least
    two (one pair is a coincidence); without shapes, the rest must name a submodule's tensor (`fc1.weight`,
    not `weight`): any two layers share `weight` and `bias`."""
    shapes = saved is not None and expected is not None
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
            if not shapes and "." not in rest:
                continue
            for new in by_rest.get(rest, ()):
                same = not shapes or tuple(saved[name]) == tuple(expected[f"{new}.{rest}"])
                if new != old and same:
                    votes.setdefault((old, new), set()).add(rest)
    renames, taken_old, taken_new = [], set(), set()
    for (old, new), rests in sorted(votes.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        olds, news = {f"{old}.{r}" for r in rests} - taken_old, {f"{new}.{r}" for r in rests} - taken_new
        if min(len(olds), len(news)) >= 2:
            renames.append((old, new, min(len(olds), len(news))))
            taken_old |= olds
            taken_new |= news
    return renames
