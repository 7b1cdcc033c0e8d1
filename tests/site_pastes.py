"""Each catalogued raise site's message as a person would paste it (issue 17): the template of the
message index (rules/load-site-messages.json, read from DeepSpeed's and torch's source) with its
placeholders filled by values of the kind each names: paths for paths, counts for counts."""

from __future__ import annotations

import re

from triage.kb.messages import SiteMessage

_BRACED = re.compile(r"\{[^{}]{0,300}\}")
_PERCENT = re.compile(r"%(?:\([^)]{0,100}\))?[-#0 +]{0,4}\d{0,3}(?:\.\d{1,3})?[sdrifgexXc]")

# (words in the placeholder's expression, value): the first that applies
_VALUES = [
    (("latest_path",), "/data/ckpt/run7/latest"),
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


def fill(template: str) -> str:
    """The template with each placeholder replaced by a value of its kind."""
    def value(match: re.Match) -> str:
        expr = match.group(0).lower()
        return next((v for words, v in _VALUES if any(w in expr for w in words)), "x7")

    return _PERCENT.sub(value, _BRACED.sub(value, template.replace("%%", "%")))


def pasted(site: SiteMessage, with_type: bool) -> str:
    """The message pasted alone: `Type: message`, or the message with its type cut off."""
    message = fill(site.template)
    return f"{site.short_exception}: {message}" if with_type else message
