"""`ds-triage inspect FILE`: what a torch.save file holds (keys, versions, saved ds_config, optimizer
layout, the globals its pickle names) as JSON, or its parameter names and shapes, read by the safe
reader: its pickle is never run, no tensor byte is read.

The rules' and probes' verify steps print this command, never `python -m triage...`: it works
wherever ds-triage is installed (pipx, uv tool, a venv), where the module path may not be
importable by the `python` on the user's PATH."""

from __future__ import annotations

import os
import sys

from triage.errors import BadInput


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "inspect", help="show what a shard holds (keys, versions, ds_config, optimizer, shapes) without running it",
        description="Print a torch.save file's metadata as JSON: its top-level keys, ds_version, mp/dp world sizes, "
        "parallel dimensions, the saved ds_config, the optimizer's state keys and parameter groups, every global "
        "its pickle names, and whether torch.load(weights_only=True) would refuse it; or, with --shapes, one "
        "`name<TAB>shape` line per parameter (a model-states shard's saved shapes, or a model file: JSON/YAML names "
        "to shapes, a torch state dict, a .safetensors header). The restricted reader never imports or runs what the "
        "pickle names. Exit 0 read, 3 the file cannot be read.")
    parser.add_argument("shard", metavar="FILE", help="a .pt file (a DeepSpeed shard, a model or optimizer state)")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--config", action="store_true", help="print only the saved ds_config (sorted JSON)")
    what.add_argument("--optimizer", action="store_true",
                      help="print only the saved optimizer's state keys and param groups")
    what.add_argument("--shapes", action="store_true", help="print `name<TAB>shape` lines, sorted by name "
                      "(diff two of them to compare a checkpoint with a model)")
    what.add_argument("--ranks", action="store_true", help="FILE is a tag dir: each rank's optimizer shard as "
                      "probe --deep's consistency check sees it (saved and expected partition size, whose slice "
                      "mappings it holds, values that differ from its slice, steps)")
    parser.set_defaults(run=run)


def run(args) -> int:
    if not os.path.lexists(args.shard):
        raise BadInput(f"{args.shard}: no such file or directory")
    if args.ranks:
        from triage.probe.checks.consistency import main

        if not os.path.isdir(args.shard):
            raise BadInput(f"{args.shard}: --ranks reads a tag dir (global_stepN), not a file")
        return main([args.shard])
    if args.shapes:
        from triage.probe.model_file import shapes_of

        shapes = shapes_of(args.shard)  # BadInput when unreadable
        sys.stdout.writelines(f"{name}\t{list(shapes[name])}\n" for name in sorted(shapes))
        return 0
    from triage.probe.safe_pickle import read_shard, show

    meta = read_shard(args.shard)
    if meta.error:
        raise BadInput(f"{args.shard}: {meta.error}")
    show(meta, args)
    return 0
