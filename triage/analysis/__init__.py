"""Analyses shared by classify (from what a log prints) and the probes (from the checkpoint in hand):
one module per concept, so the two never reason about the same thing twice.

    state_dict   what a state-dict difference means: wrapper prefixes, renames, adapters, engine
                 keys, buffers, a resized vocabulary, a dropped tied head, ZeRO-3 placeholders,
                 a tensor- or data-parallel ratio, or an architecture change
    names        which names are one tensor under another name: wrapper prefixes, renamed modules

Standard library only: classify imports it, and classify never imports torch.
"""
