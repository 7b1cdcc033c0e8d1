"""The facts a rule pattern can require (`facts:` in rules/schema.json): every signal of the
state-dict analysis and of the error facts, and the qualifiers each takes. `of_incident` computes
them once per log for the matcher; `problems` is what `rules lint` says of a rule that names one
that does not exist."""

from __future__ import annotations

from triage.analysis import error_facts, state_dict
from triage.analysis.state_dict import Difference, Signal

KNOWN = {**state_dict.SIGNALS, **error_facts.FACTS}
_SIDES = ("checkpoint", "model", "both")
# name -> the qualifiers it takes; None: any word (pickled_class: the package)
QUALIFIERS: dict[str, tuple[str, ...] | None] = {
    **{name: _SIDES for name in ("prefix_module", "prefix_orig_mod", "prefix_peft", "prefix_model", "adapter_keys",
                                 "engine_keys", "buffers_only", "zero3_placeholder", "tp_ratio")},
    "dp_ratio": ("checkpoint", "load"),
    "adapter_shapes": ("base", "rank"),
    "missing": tuple(dict.fromkeys([kind for kind, _ in error_facts._KINDS] + list(error_facts._SHARD_KINDS.values())))
    + ("other",),
    "truncated": tuple(form for form, _ in error_facts._TRUNCATED),
    "not_a_directory": ("file",),
    "is_a_directory": ("directory",),
    "pickled_class": None,
}


def of_incident(incident, partition: tuple[int, int] | None = None) -> list[Signal]:
    """What the log's error content says: its state-dict difference read into signals, and the
    facts of every exception's message."""
    diff = Difference(missing=list(incident.missing_keys), unexpected=list(incident.unexpected_keys),
                      sizes={s["param"]: (s["checkpoint"], s["model"]) for s in incident.size_mismatches},
                      partition=partition if partition is not None else getattr(incident, "partition", None))
    signals = state_dict.analyse(diff) if diff else []
    return signals + error_facts.facts(e for chain in incident.chains for e in chain.exceptions)


def holds(signals: list[Signal], name: str, qualifier: str | None) -> Signal | None:
    return next((s for s in signals if s.holds(name, qualifier)), None)


# What torch prints a state-dict difference with: the first of them in the log is the line to cite.
_DIFFERENCE_TEXT = ("size mismatch for ", " key(s) in state_dict: ", "The size of tensor a (")


def source(signal: Signal, text: str, exceptions) -> tuple[int | None, object | None]:
    """Where a signal was read: (offset in the log text, None) for a state-dict signal, (None, the
    first exception whose message says it) for an error fact; (None, None) when neither is found."""
    if signal.name in state_dict.SIGNALS:
        found = [at for at in (text.find(t) for t in _DIFFERENCE_TEXT) if at >= 0]
        return (min(found) if found else None), None
    said = next((e for e in exceptions if holds(error_facts.facts([e]), signal.name, signal.qualifier)), None)
    return None, said


def problems(fact: str) -> str | None:
    """Why a `facts:` entry names nothing the analyses produce, or None."""
    name, _, qualifier = fact.partition(":")
    if name not in KNOWN:
        return f"unknown fact {name!r}. Use one of {sorted(KNOWN)} (triage/analysis/)"
    allowed = QUALIFIERS.get(name, ())
    if qualifier and allowed is not None and qualifier not in allowed:
        return (f"fact {name!r} takes no qualifier {qualifier!r}" + (f". Use one of {list(allowed)}" if allowed else
                ". Give it without one"))
    return None
