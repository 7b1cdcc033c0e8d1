"""A log in, one `Incident` out.

`inputs` reads bytes safely (size cap, encoding, binary garbage) -> `normalize` strips the
noise around each line (ranks, colours, timestamps) -> `tracebacks` and `torchrun` find the
exception chains and the launcher's summary -> `facts` reads versions, paths, shards and size
mismatches -> `parse` assembles the `incident.Incident` the matcher reads. `runs` finds where the
failing run starts in a log that holds several. Nothing here knows the rules.
"""
