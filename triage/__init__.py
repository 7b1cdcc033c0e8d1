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

__version__ = "0.1.0"


def classify(text: str, *, rules=None):
    """Classify a log text; returns a `triage.classify.report.Report`."""
    from triage.classify.classifier import classify as _classify

    return _classify(text, rules=rules)
