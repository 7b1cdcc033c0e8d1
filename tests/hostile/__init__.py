"""Hostile checkpoints and logs, built from real DeepSpeed checkpoints (issue 16).

Each module builds one family of attack on a copy of a real baseline checkpoint
(tests/probe_checkpoints.py) or on real log text: `payloads` (pickles whose loading runs
code), `paths` (symlinks, FIFOs, devices, `..` tags that lead outside the checkpoint root),
`pickles` (metadata built to exhaust memory or time in the safe reader). A payload never
does harm: it writes a marker file, so a test can tell whether it ran.
"""
