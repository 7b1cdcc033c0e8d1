"""Repairs: `ds-triage repair ACTION CKPT [--out DIR] [--apply]`.

Each action (latest, fp32, universal, strip-optimizer, config; triage/repair/registry.py) is a
module with three functions:

* ``plan(source, options) -> Plan``: what it will read, write and run (pure; reads the checkpoint
  through the probe layer only). A dry run prints this and stops.
* ``execute(plan, staging)``: does it. Every action but `latest` writes into a fresh staging dir
  beside `--out`, renamed to `--out` only when complete; `latest` is the one in-place edit (a
  backup first, then an atomic os.replace).
* ``structural(plan) -> list[Check]``: checks the result without torch (probe layer, names and
  shapes); triage/repair/real_load.py then loads it with real DeepSpeed in a subprocess when the
  user names the model (--model-factory).

The original checkpoint is never written to (except `latest`, as above). DeepSpeed's own tools
do the conversions (deepspeed.utils.zero_to_fp32, deepspeed.checkpoint.ds_to_universal), run as
the installed modules in a subprocess, never the copies DeepSpeed puts into a checkpoint.
This package imports neither torch nor deepspeed; only triage/repair/load_check.py (the
subprocess worker) does.

After a save rather than a failure: `verify` gates a checkpoint on the probes and its manifest
(`ds-triage verify`), and `guarded_save.save_checkpoint_safely(engine, save_dir)` saves,
verifies and writes the manifest before it moves `latest` (called from a training script).
"""

# `ds-triage repair` exit codes (docs/exit-codes.md); here so the CLI needs no heavier import.
EXIT_REPAIRED = 0  # dry run: the plan was printed; --apply: written and every verification that ran passed
EXIT_NOT_REPAIRED = 1  # refused (the action does not fit this checkpoint) or a verification failed
