"""A raise site's message template with its placeholders filled by values of the kind each names.

Paths for paths, counts for counts: what a person's paste of the message would hold. The
coverage accounting (triage.kb.coverage) runs a rule's message regex over it; the tests paste it.
"""

from __future__ import annotations

import re

_BRACED = re.compile(r"\{[^{}]{0,300}\}")
_PERCENT = re.compile(r"%(?:\([^)]{0,100}\))?[-#0 +]{0,4}\d{0,3}(?:\.\d{1,3})?[sdrifgexXc]")
_PLACEHOLDER = re.compile(f"{_BRACED.pattern}|{_PERCENT.pattern}")

# (words in the placeholder's expression, value): the first that applies
_VALUES = [
    (("latest_path",), "/data/ckpt/run7/latest"),
    (("side",), "source"),  # affine_transfer's `{side}: ...`: "source" or "target"
    (("glob_pattern",), "*_optim_states.pt"),
    (("dir", "folder", "checkpoint_dir", "load_dir", "root"), "/data/ckpt/run7/global_step1200"),
    (("path", "file", "ckpt", "name"), "/data/ckpt/run7/global_step1200/mp_rank_00_model_states.pt"),
    (("shape", "size("), "torch.Size([4096, 1024])"),
    (("type(",), "<class 'list'>"),
    (("sorted(", "list(", "missing", "keys", "ranks", "locations"), "['layers.3.mlp.weight', 'layers.3.mlp.bias']"),
    (("key",), "'optimizer_state_dict'"),
    (("version", "ver"), "0.3.16"),
    (("dtype",), "'float8'"),
    (("box", "frame", "piece", "local"), "(0, 512)"),
    (("len(", "count", "num", "rank", "size", "degree", "idx", "index", "offset", "numel", "world", "stage", "step",
      "expected", "held", "total", "start", "stop", "dim", "axis", "id", "width"), "2"),
]
# Values tried for every placeholder alike, when the kind-aware filling does not match a regex.
PLAIN_VALUES = ("2", "x7", "/data/ckpt/run7/global_step1200", "True")


def _filled(template: str, value) -> tuple[str, list[tuple[int, int]]]:
    """The template with each placeholder given value(match), and the spans of its literal text."""
    text = template.replace("%%", "%")
    out, spans, at, pos = [], [], 0, 0
    for match in _PLACEHOLDER.finditer(text):
        literal = text[pos:match.start()]
        spans.append((at, at + len(literal)))
        out += [literal, value(match)]
        at += len(literal) + len(out[-1])
        pos = match.end()
    spans.append((at, at + len(text) - pos))
    out.append(text[pos:])
    return "".join(out), [span for span in spans if span[0] < span[1]]


def _kind(match: re.Match) -> str:
    expr = match.group(0).lower()
    return next((v for words, v in _VALUES if any(w in expr for w in words)), "x7")


def fill(template: str) -> str:
    """The template with each placeholder replaced by a value of its kind."""
    return _filled(template, _kind)[0]


def fillings(template: str, values: tuple[str, ...] = ()) -> list[tuple[str, list[tuple[int, int]]]]:
    """(text, spans of the template's own text) for the kind-aware filling, then for every
    placeholder given each plain value, then each of `values`."""
    out = [_filled(template, _kind)]
    if len(out[0][1]) > 1 or _PLACEHOLDER.search(template.replace("%%", "%")):
        out += [_filled(template, lambda _, v=v: v) for v in PLAIN_VALUES + tuple(values)]
    return out
