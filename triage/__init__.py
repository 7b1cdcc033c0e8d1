"""ds-triage: diagnose DeepSpeed checkpoint-loading failures.

The flow, one package a step:

    logs/      a log in, one Incident out
    classify/  the Incident against the rules (kb/): ranked hypotheses, evidence, report
    probe/     each hypothesis confirmed or refuted on the checkpoint directory
    repair/    fix the checkpoint (dry run first), then verify it; the guarded save

Beside them: `kb/` (the rules and the site catalogue), `runbook/` (lookup and generated
pages), `eval/` (accuracy over corpus/), `stream/` (log aggregation), `chat/`, `manifest/`,
and `cli/`, which wires each subcommand to them.

The classify path (logs, classify, kb) never imports torch or deepspeed, so a pasted log is
diagnosed in well under a second.
"""

import types

__version__ = "0.1.0"


class _Classify(types.ModuleType):
    """The `triage.classify` subpackage, callable as the API function `triage.classify(text)`.

    A function named `classify` here would be replaced by the subpackage the first time
    anything imports it (the import system binds a subpackage on its parent), so the API
    would answer once per process. The name is the subpackage, made callable: one object
    whatever was imported first."""

    def __call__(self, text: str, *, rules=None):
        """Classify a log text; returns a `triage.classify.report.Report`."""
        from triage.classify.classifier import classify

        return classify(text, rules=rules)


from triage import classify  # noqa: E402  (the subpackage: a docstring; no torch, nothing heavy)

classify.__class__ = _Classify
