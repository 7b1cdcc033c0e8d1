"""Real faulted checkpoints for the probe tests, made by the corpus generator.

The baselines of LAYOUTS (ZeRO-2 dp 2, ZeRO-3 dp 2, ZeRO-2 dp 1 and ZeRO-0 dp 1, fp32; ZeRO-1 dp 2
fp32; ZeRO-1/2/3 dp 2 bf16) are trained and saved by real DeepSpeed through
`corpus.generate.build_bases` (those of one world size in one launch), once per machine and
fingerprint (deepspeed version + the worker scripts), then reused. Each scenario is a copy of its baseline
with the corpus scenario's own fault applied (`corpus.faults.apply` of its `inject` steps), under
a world-traversable directory so an unprivileged user can reach it; `silent(id)` builds one of
corpus/silent.py's checkpoint-only faults the same way (its `pre` training runs included).
"""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import os
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = Path(os.environ.get("DS_TRIAGE_PROBE_WORK", "/tmp/ds-triage-probe-tests"))
LAYOUTS = ("z2-dp2-fp32", "z3-dp2-fp32", "z2-dp1-fp32", "z0-dp1-fp32",  # dp 1: the repair tests
           "z1-dp2-fp32", "z1-dp2-bf16", "z2-dp2-bf16", "z3-dp2-bf16")  # the consistency tests

# scenario id (corpus/scenarios.py) -> what it is, for the tests
HEALTHY = "resume-z2-dp2-fp32"
ZERO3 = "zero3-saved-stage2-load-dp2"
SCENARIOS = (
    HEALTHY, ZERO3,
    "zero2-dp2-optim-shard-deleted", "zero2-dp2-model-states-deleted", "zero2-dp2-optim-shard-truncated",
    "zero2-dp2-optim-shard-zeroed", "zero2-dp2-optim-shard-random", "zero3-dp2-latest-deleted",
    "zero2-dp2-optim-shard-unreadable", "zero3-dp2-tag-dir-unreadable",
)


def fingerprint() -> str:
    from corpus.generate import baseline_fingerprint

    return baseline_fingerprint()


def _traversable(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o755)
    return path


@lru_cache(maxsize=None)
def baselines() -> Path:
    """The `_base` dir holding every layout in LAYOUTS, built (or reused) under a lock."""
    from corpus import generate, runner

    _traversable(WORK)
    work = _traversable(WORK / fingerprint())
    base = _traversable(work / "_base")
    with open(work / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        runner.EXT_DIR["path"] = str(generate.EXT_CACHE)
        if not all((base / f"{name}.json").exists() for name in LAYOUTS):
            generate.warm_up_ops(work)
        generate.build_bases(LAYOUTS, base)
    return base


@lru_cache(maxsize=None)
def layout_base(name: str) -> Path:
    """The saved baseline of corpus layout `name`: LAYOUTS' from baselines(), any other built (once
    per fingerprint) beside them in `_extra`, so the tests that read every baseline shard keep theirs."""
    if name in LAYOUTS:
        return baselines() / name
    return layout_bases((name,)) / name


def layout_bases(names) -> Path:
    """Build (or reuse) the `_extra` baselines of `names` at once, those of one world size in one
    launch (corpus.generate.build_bases); returns `_extra`."""
    from corpus import generate, runner

    work = _traversable(WORK / fingerprint())
    extra = _traversable(work / "_extra")
    names = [name for name in names if name not in LAYOUTS]
    # the checkpoint gate's test trains into `_extra` too (--baselines), under this same lock
    with open(extra / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        runner.EXT_DIR["path"] = str(generate.EXT_CACHE)
        if not all((extra / f"{name}.json").exists() for name in names):
            generate.warm_up_ops(work)
        generate.build_bases(names, extra)
    return extra


@lru_cache(maxsize=None)
def session_dir() -> Path:
    """This session's scenario copies; removed when the interpreter exits."""
    _traversable(WORK)
    path = _traversable(Path(tempfile.mkdtemp(prefix="session-", dir=WORK)))
    atexit.register(cleanup)
    return path


def scenario_entry(case_id: str) -> dict:
    from corpus.scenarios import SCENARIOS as ALL

    return next(s for s in ALL if s["id"] == case_id)


@lru_cache(maxsize=None)
def scenario(case_id: str) -> Path:
    """A fresh copy of the scenario's baseline, with the steps its job ran before the load (a
    conversion, say) and its fault; the checkpoint root."""
    from corpus import faults, layouts, runner

    entry = scenario_entry(case_id)
    layout = layouts.LAYOUTS[entry["layout"]]
    root = session_dir() / case_id
    shutil.copytree(layout_base(entry["layout"]), root, symlinks=True)
    if entry.get("user") == "nobody":
        faults.make_world_readable(str(root))
    ckpt = root / layout.get("sub", "")  # a Trainer-style layout saves in checkpoint-N/ (its `sub`)
    for number, step in enumerate(entry.get("pre", [])):
        _run(runner.build_command(step, layout, str(ckpt)), root.parent / f"{case_id}.pre{number}.log")
    if entry.get("inject"):
        faults.apply(str(ckpt), entry["inject"])
    return root


@lru_cache(maxsize=None)
def saved_by_run(case_id: str) -> Path:
    """A scenario whose own run trains and saves (run "train"), run here on its copy: the dir it saved."""
    from corpus import layouts, runner

    entry = scenario_entry(case_id)
    layout = layouts.LAYOUTS[entry["layout"]]
    ckpt = scenario(case_id) / layout.get("sub", "")
    _run(runner.build_command(entry, layout, str(ckpt)), ckpt.parent / f"{case_id}.run.log", entry.get("any_exit"))
    return Path(os.path.normpath(ckpt / entry.get("load_dir", "")))


def _run(command: list[str], log: Path, any_exit: bool = False) -> None:
    from corpus import generate, runner

    runner.EXT_DIR["path"] = str(generate.EXT_CACHE)
    code = runner.run(command, {}, log)
    if code != 0 and not any_exit:
        raise RuntimeError(runner.failure(runner.display(command, {}), code, log))


@lru_cache(maxsize=None)
def silent(case_id: str) -> Path:
    """A fresh copy of a corpus/silent.py case (its pre runs done, its fault injected); the save dir."""
    from corpus import silent as table

    entry = next(s for s in table.SILENT if s["id"] == case_id)
    return table.build(entry, baselines(), session_dir() / case_id)


def copy_of(case_id: str, name: str) -> Path:
    """Another private copy of a scenario (for tests that change it further)."""
    target = session_dir() / f"{case_id}--{name}"
    if target.exists():
        _make_removable(target)
        shutil.rmtree(target)
    shutil.copytree(scenario(case_id), target, symlinks=True)
    return target


def cleanup() -> None:
    if session_dir.cache_info().currsize:
        path = session_dir()
        _make_removable(path)
        shutil.rmtree(path, ignore_errors=True)


def _make_removable(path: Path) -> None:
    for dirpath, dirnames, _ in os.walk(path):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), 0o755)


def snapshot(root: Path) -> dict[str, tuple[str, int, int]]:
    """path -> (sha256, mtime_ns, mode) of every file and dir under root (as root, read everything)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        st = os.stat(dirpath)
        out[dirpath] = ("dir", st.st_mtime_ns, st.st_mode)
        for name in filenames:
            path = os.path.join(dirpath, name)
            st = os.stat(path)
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            out[path] = (digest, st.st_mtime_ns, st.st_mode)
    return out
