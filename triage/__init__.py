"""ds-triage: diagnose DeepSpeed checkpoint-loading failures.

The classify path (this package minus `triage.probes`) never imports torch or
deepspeed, so a pasted log is diagnosed in well under a second.
"""

__version__ = "0.1.0"


def classify(text: str, *, rules=None):
    """Classify a log text; returns a `triage.report.Report`."""
    from triage.classifier import classify as _classify

    return _classify(text, rules=rules)
