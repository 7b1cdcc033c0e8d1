"""An `Incident` against the rules: ranked hypotheses with their evidence.

`classifier.classify(text)` parses the log (`triage.logs`) and `match.rank`s every rule of the
knowledge base (`triage.kb`) against the incident, with `partial` weighing what a paste lacks
(relaxed patterns on cut exceptions; the rules of the raise sites whose messages `messages`
finds through the message index); `commands` fills each hypothesis's verify
commands; `report.Report` is the result and `render` prints it for people.
`example_lines` picks the deciding lines of a rule's own examples. Never imports torch.
"""
