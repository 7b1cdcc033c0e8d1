"""Silent faults of the checkpoint itself: DeepSpeed loads them with no error and no warning.

    python -m corpus.silent --keep DIR [--only GLOB] [--load]     # build them (and load each for real)

Each is a real baseline (corpus/layouts.py, trained and saved by real DeepSpeed) with the files of
real saves moved around: two ranks' optimizer shards exchanged, or one rank's shard copied in from
a later save of the same run (a `pre` training run writes that save). A resume from them prints
what a healthy resume prints, so they are not in the log corpus (scenarios.py): the log cannot
tell, and `ds-triage eval` scores logs. The checkpoint can: `ds-triage probe --deep` (the
consistency probe) finds each one and `verify --deep` fails on it. Same entry keys as
scenarios.py (inject: corpus/faults.py steps, paths relative to the save dir; pre: runs first).
"""
import argparse
import fnmatch
import shutil
import sys
from pathlib import Path

from corpus import faults, layouts as L, runner
from corpus.layouts import TAG as T

OPT = "zero_pp_rank_{r}_mp_rank_00_optim_states.pt"
BOPT = "bf16_zero_pp_rank_{r}_mp_rank_00_optim_states.pt"
LATER = "global_step5"
# a second save of the same run, two steps later: train 5 steps from scratch, saving at step 3 and 5
TRAIN_TWO_SAVES = dict(run="train", args={"steps": 5}, flags=["--save-every", "3"])

SILENT = []


def case(id, layout, fault, inject, expect, pre=()):
    SILENT.append(dict(id=id, kind="silent", category="corrupt_file", layout=layout, fault=fault,
                       inject=inject, pre=list(pre), expect=expect))


for _lay, _name in (("z2-dp2-fp32", OPT), ("z2-dp2-bf16", BOPT), ("z1-dp2-fp32", OPT)):
    case(f"{_lay}-optim-shards-swapped", _lay, f"{T}/{_name.format(r=0)} and {_name.format(r=1)} exchanged",
         [("swap", f"{T}/{_name.format(r=0)}", f"{T}/{_name.format(r=1)}")], ["consistency.shard_swapped"])
for _lay, _expect in (("z2-dp2-fp32", ["consistency.master_differs", "consistency.step_differs"]),
                      ("z3-dp2-fp32", ["consistency.step_differs"])):
    case(f"{_lay}-optim-shard-from-later-save", _lay,
         f"{T}/{OPT.format(r=1)} replaced by the same rank's shard of {LATER} (the same run, two steps later); "
         f"`latest` names {T}",
         [("copy_over", f"{LATER}/{OPT.format(r=1)}", f"{T}/{OPT.format(r=1)}"), ("write_file", "latest", T)],
         _expect, pre=[TRAIN_TWO_SAVES])


def build(entry: dict, base: Path, dest: Path) -> Path:
    """A copy of the entry's baseline at dest with its pre runs done and its fault injected; the save dir."""
    lay = L.LAYOUTS[entry["layout"]]
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(base / entry["layout"], dest, symlinks=True)
    ckpt = dest / lay.get("sub", "")
    for n, pre in enumerate(entry["pre"]):
        log = dest.parent / f"{entry['id']}.pre{n}.log"
        rc = runner.run(runner.build_command(pre, lay, str(ckpt)), {}, log)
        if rc != 0:
            raise RuntimeError(runner.failure(f"{entry['id']}: pre-step {pre}", rc, log))
    faults.apply(str(ckpt), entry["inject"])
    return ckpt


def load_command(entry: dict, ckpt: Path) -> list[str]:
    """The real resume (corpus/workers/load.py under torchrun) a job would run on it."""
    return runner.build_command({"run": "load"}, L.LAYOUTS[entry["layout"]], str(ckpt))


def main() -> int:
    from corpus import generate

    p = argparse.ArgumentParser(prog="python -m corpus.silent", description=__doc__.splitlines()[0])
    p.add_argument("--keep", type=Path, required=True, help="build under DIR/<id>/ (baselines in DIR/_base/)")
    p.add_argument("--only", help="fnmatch glob over the ids")
    p.add_argument("--load", action="store_true", help="also resume from each with real DeepSpeed; log beside it")
    args = p.parse_args()
    base = args.keep.resolve() / "_base"
    base.mkdir(parents=True, exist_ok=True)
    runner.EXT_DIR["path"] = str(generate.EXT_CACHE)
    for entry in SILENT:
        if args.only and not fnmatch.fnmatchcase(entry["id"], args.only):
            continue
        generate.build_base(entry["layout"], base, False)
        ckpt = build(entry, base, args.keep.resolve() / entry["id"])
        line = f"{entry['id']}: {entry['fault']} -> {ckpt}"
        if args.load:
            log = ckpt.parent / f"{entry['id']}.load.log"
            rc = runner.run(load_command(entry, ckpt), {}, log)
            text = log.read_text(errors="replace")
            loud = [w for w in ("Traceback", "Error", "WARNING") if w in text]
            line += f"; real load: exit {rc}, " + (f"printed {', '.join(loud)}" if loud else "no error, no warning")
        print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
