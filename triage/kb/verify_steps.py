"""A rule's verify commands as every renderer shows them: the safe ones first, and those that run the
checkpoint's pickled code (`runs_checkpoint_code: true`, torch.load(weights_only=False)) last, with
a warning in what they show."""

from __future__ import annotations

WARNING = "WARNING: runs the file's pickled code: only on a checkpoint you trust"


def ordered(steps: list[dict]) -> list[dict]:
    """The steps, safe ones first (stable: the rule's order within each group), `shows` warned."""
    return [dict(step, shows=shows(step)) for step in sorted(steps, key=runs_code)]


def runs_code(step: dict) -> bool:
    return bool(step.get("runs_checkpoint_code"))


def shows(step: dict) -> str:
    return f"{step['shows']} ({WARNING})" if runs_code(step) else step["shows"]
