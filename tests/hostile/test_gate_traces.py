"""The gate's file list is a superset of what DeepSpeed really opens, on every corpus layout (issue 40,
"Done when").

Every layout of corpus/layouts.py is loaded for real, with an audit hook on `open` in every process
(a sitecustomize on PYTHONPATH): the direct layouts' baselines (tests/probe_checkpoints.py; the
killed save's load fails, as its job's did) and the DeepSpeed part of the framework layouts' committed
checkpoints (corpus/checkpoints/; NOT_TRACED says which have none). tests/hostile/trace_loads_worker.py
runs DeepSpeed's engine.load_checkpoint with the model the job used, every job of one world size in
one torchrun launch, and zero_to_fp32 and ds_to_universal of every tag in one plain process (where a
converter refuses a layout, what it opened before is traced all the same; _refuses says where). Also
loaded: ZeRO-3 without optimizer states on one rank (it reads through zero_to_fp32 and `latest`), and
the universal checkpoints ds_to_universal made of ZeRO-2 and ZeRO-3, with checkpoint.load_universal.
Every regular file under a checkpoint that any of them opened for reading must be in the gate's list
(triage/probe/load_files.py) under a name the gate judges, or be a pointer (`latest`,
`latest_universal`) the gate reads itself.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from corpus import kept, layouts, runner
from tests import probe_checkpoints as pc
from tests.repair_support import ext_env
from triage.probe import load_files, trust, zipcheck
from triage.probe.safe_pickle import read_shard

pytestmark = pytest.mark.slow

ROOT = pc.ROOT
TAG = layouts.TAG
WORKER = str(Path(__file__).with_name("trace_loads_worker.py"))
TRACE = "DS_TRIAGE_OPEN_TRACE"
# layouts with nothing here to load, and why (every other corpus layout is traced)
NOT_TRACED = {
    "pretrained": "no DeepSpeed checkpoint: transformers' save_pretrained and a PEFT adapter (safetensors)",
    "killed-save-accelerate-z2-dp1-fp32": "no committed checkpoint (made with accelerate, which CI lacks); "
                                          "its direct twin killed-save-z2-dp1-fp32 is traced",
}
DIRECT = [n for n, lay in layouts.LAYOUTS.items() if not lay.get("worker")]
FRAMEWORK = [n for n, lay in layouts.LAYOUTS.items() if lay.get("worker") and n not in NOT_TRACED]
UNIVERSAL = ("z2-dp2-fp32", "z3-dp2-fp32")  # ds_to_universal's output of these, loaded with load_universal
# a corpus load that opens a layout's files by another path: ZeRO-3 without optimizer states reads the
# weights through zero_to_fp32, by `latest` (zero3-dp2-saved-load-dp1-no-optim)
VARIANTS = {"z3-dp2-fp32-on-dp1-no-optim": ("z3-dp2-fp32", 1, {"load_optimizer_states": False})}
NAMES = DIRECT + FRAMEWORK + list(VARIANTS) + [f"universal-{n}" for n in UNIVERSAL]
CONVERTERS = ("zero_to_fp32", "ds_to_universal")

SITECUSTOMIZE = '''
import os, sys
_dir = os.environ.get("DS_TRIAGE_OPEN_TRACE")
if _dir and (os.environ.get("RANK") is not None or os.environ.get("DS_TRIAGE_TRACE_ALL")):
    _fds = {}

    def _hook(event, args):
        if event != "open" or not isinstance(args[0], (str, bytes)):
            return
        mode, flags = args[1], args[2]
        if (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR)):
            return  # a write: the tools' own output
        pid = os.getpid()
        if pid not in _fds:
            _fds[pid] = -1  # the os.open below raises "open" too
            _fds[pid] = os.open(os.path.join(_dir, f"{pid}.txt"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if _fds[pid] >= 0:
            os.write(_fds[pid], os.fsencode(os.path.abspath(os.fsdecode(args[0]))) + b"\\n")

    sys.addaudithook(_hook)
'''


def _job(name: str, layout: str, root: Path, load_dir: Path, out: Path, tag: str | None = None, **extra) -> dict:
    job = dict(name=name, layout=layout, root=str(root), load_dir=str(load_dir), tag=tag, options={},
               tag_dir=str(load_dir / (tag or TAG)), twin=None, universal=False, out=str(out / name),
               world=layouts.nproc(layouts.LAYOUTS[layout]))
    return dict(job, **extra)


def _direct(base: Path, name: str, layout: str | None = None, **extra) -> dict:
    layout = layout or name
    root = base / name
    shutil.copytree(pc.layout_base(layout), root, symlinks=True)
    lay = layouts.LAYOUTS[layout]
    tag = TAG if lay.get("kill_after_saves") else None  # no `latest`: its job named the tag, and failed
    return _job(name, layout, root, root / lay.get("sub", ""), base / "out", tag, **extra)


def _framework(base: Path, name: str) -> dict:
    """The committed checkpoint, unpacked; its DeepSpeed save dir (where `latest` is) loaded into the twin
    of its saved param groups (its model is a transformers one)."""
    with tarfile.open(kept.ARCHIVES / f"{name}.tar.xz", "r:xz") as tar:
        tar.extractall(base / "fw", filter="data")
    root = base / "fw" / name
    load_dir = next(p.parent for p in sorted(root.rglob("latest")))
    tag_dir = load_dir / (load_dir / "latest").read_text().strip()
    model = sorted(tag_dir.glob("*model_states.pt"))[0]
    return _job(name, name, root, load_dir, base / "out", tag_dir=str(tag_dir),
                twin=read_shard(str(model)).param_group_shapes)


def _universal(base: Path, source: str) -> dict:
    load_dir = base / "out" / source / "universal"  # ds_to_universal wrote latest_universal here
    return _job(f"universal-{source}", source, load_dir, load_dir, base / "out", universal=True)


def _run(cmd: list[str], env: dict, log: Path) -> subprocess.Popen:
    with log.open("wb") as out:  # its own session: torchrun and its ranks are stopped together
        return subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


def _wait(proc: subprocess.Popen, log: Path, timeout: int = 600) -> None:
    try:
        code = proc.wait(timeout=timeout)
    finally:
        _stop(proc)
    assert code == 0, log.read_text(errors="replace")[-4000:]


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> tuple[Path, dict[str, dict], dict[str, dict]]:
    """Every layout loaded and converted, traced: (trace dir, jobs by name, outcomes by name)."""
    base = tmp_path_factory.mktemp("traces")
    trace, hook = base / "trace", base / "hook"
    trace.mkdir()
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = dict(runner.base_env(), **ext_env(), **{TRACE: str(trace)},
               PYTHONPATH=os.pathsep.join([str(hook), str(ROOT)]))
    pc.layout_bases(DIRECT)
    jobs = [_direct(base, n) for n in DIRECT] + [_framework(base, n) for n in FRAMEWORK]
    (base / "convert.json").write_text(json.dumps(jobs))
    convert = _run([sys.executable, WORKER, "convert", str(base / "convert.json"), str(base / "converted.json")],
                   dict(env, DS_TRIAGE_TRACE_ALL="1"), base / "convert.log")
    jobs += [_direct(base, n, lay, world=world, options=options) for n, (lay, world, options) in VARIANTS.items()]
    jobs += [_universal(base, n) for n in UNIVERSAL]
    outcomes: dict[str, dict] = {}
    try:
        for world in (1, 2):  # 1 beside the converters (two processes, two cores); 2 after: it loads their output
            if world == 2:
                _wait(convert, base / "convert.log")
            plan, log, out = base / f"load-{world}.json", base / f"load-{world}.log", base / f"loaded-{world}.json"
            plan.write_text(json.dumps([j for j in jobs if j["world"] == world]))
            cmd = runner.TORCHRUN + [f"--nproc_per_node={world}", WORKER, "load", str(plan), str(out)]
            _wait(_run(cmd, dict(env, PET_MASTER_PORT=str(runner.free_port())), log), log)
            outcomes.update(json.loads(out.read_text()))
    finally:
        _stop(convert)
    for name, outcome in json.loads((base / "converted.json").read_text()).items():
        outcomes[name].update(outcome)
    return trace, {j["name"]: j for j in jobs}, outcomes


def _refuses(layout: str, converter: str) -> bool:
    """Whether DeepSpeed 0.19.8's converter refuses the layout with its own error: zero_to_fp32 reads
    ZeRO-1/2/3 shards of one model-parallel rank; ds_to_universal needs optimizer shards with Adam's state."""
    lay = layouts.LAYOUTS[layout]
    if lay.get("kill_after_saves") or lay["stage"] == 0:  # no optimizer shard
        return True
    return bool(lay.get("pipe") or lay.get("tp")) if converter == "zero_to_fp32" else lay.get("optimizer") == "sgd"


def _opened(trace: Path, root: str) -> set[str]:
    prefix = root + os.sep
    paths = {line for f in trace.glob("*.txt") for line in f.read_text().splitlines()}
    return {p for p in paths if p.startswith(prefix) and os.path.isfile(p)}


def _judged(path: str) -> bool:
    """Whether the gate judges this file (trust.judge does not pass it over)."""
    with open(path, "rb") as f:
        head = f.read(len(zipcheck.LEGACY_MAGIC))
    return load_files.loadable(os.path.basename(path)) or head.startswith(trust.TORCH_MAGIC)


def test_every_corpus_layout_is_traced():
    assert set(layouts.LAYOUTS) == set(DIRECT) | set(FRAMEWORK) | set(NOT_TRACED)
    assert all((kept.ARCHIVES / f"{n}.tar.xz").is_file() for n in FRAMEWORK)


@pytest.mark.parametrize("name", NAMES)
def test_every_file_deepspeed_opened_is_in_the_gates_list(traced, name):
    trace, jobs, outcomes = traced
    job, outcome = jobs[name], outcomes[name]
    killed = bool(layouts.LAYOUTS[job["layout"]].get("kill_after_saves"))
    assert (outcome["load"] == "ok") != killed, outcome  # the killed save's load fails, as its job's did
    converted = name in DIRECT + FRAMEWORK
    for converter in CONVERTERS if converted else ():  # a refusal is a trace too, but only where expected
        assert (outcome[converter] == "ok") != _refuses(job["layout"], converter), outcome
    opened = _opened(trace, job["root"])
    found = load_files.discover(job["load_dir"], job["tag"])
    listed = {os.path.realpath(f) for f in found.files}
    assert opened, f"the trace saw no file of {job['root']} opened"
    missed = sorted(p for p in opened if p not in found.pointers and not (os.path.realpath(p) in listed and _judged(p)))
    assert not missed, (missed, outcome)
    assert not found.refused and trust.scan_load(job["load_dir"], job["tag"]).untrusted == []  # healthy, and seen so
    shards = {p for p in opened if p.endswith(".pt") and p.startswith(job["load_dir"] + os.sep)}
    if job["universal"]:  # the universal load read zero/, through latest_universal
        assert os.path.join(job["load_dir"], "latest_universal") in opened
        assert any(f"{os.sep}zero{os.sep}" in p for p in shards) and found.tags == [f"{TAG}_universal"]
    elif converted:  # the engine and the converters between them read every shard of the tag
        assert shards == {f for f in found.files if f.endswith(".pt")}, (shards, outcome)
