"""Accuracy over the corpus: `ds-triage eval`.

In: the labelled real logs under `corpus/` (`corpus` reads them). Out: `evaluate` classifies
each and scores top-1 / top-3, the confusion matrix and the clean-log and negative gates;
`ambiguity` finds logs that are the same text for different causes (the log-only ceiling);
`render` prints the tables.
"""
