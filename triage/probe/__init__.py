"""The probe layer: check the checkpoint itself, read-only, and confirm or refute causes.

Each probe is a small function `probe(ctx) -> ProbeResult` (triage/probe/checks/). Its status
is about the problem its name is about:

* ``confirmed``: the probe found that problem. `completeness` confirmed means shards are
  missing (or the saved layout cannot be loaded by the target stage / world size);
  `permission` confirmed means something the load needs cannot be traversed or read;
  `integrity` confirmed means a shard is damaged or its pickle names code; and so on.
* ``refuted``: the probe looked and the problem is not there.
* ``inconclusive``: the probe could not tell (nothing to compare with, a file it could not
  read, a layout it does not know).

A result also carries `signals` (the specific problems found, e.g. ``optim_missing``) and
`checked` (the signals it was able to test, found or not); the triage step
(triage/probe/verdict.py) maps them to rule categories through one table.

Probes never write to the checkpoint, never execute pickled code (triage/probe/safe_pickle.py)
and import neither torch nor deepspeed.
"""

from triage.probe.result import CONFIRMED, INCONCLUSIVE, REFUTED, ProbeResult

__all__ = ["CONFIRMED", "INCONCLUSIVE", "REFUTED", "ProbeResult"]
