"""The gate's file list is a superset of what DeepSpeed really opens (issue 40, "Done when").

On real baselines (ZeRO-2 and ZeRO-3 dp 2 fp32, ZeRO-1 dp 2 bf16, ZeRO-2 dp 2 bf16) and a real
universal checkpoint (ds_to_universal's output of the ZeRO-2 one, loaded with
checkpoint.load_universal), three things run with an audit hook on `open` (a sitecustomize on
PYTHONPATH, so it is in every process, the torchrun ranks included): the project's own real load
(the reproduce probe: DeepSpeed's engine.load_checkpoint under torchrun), zero_to_fp32 (through
triage.repair.fp32) and ds_to_universal. Every regular file under a checkpoint root that any of them
opened for reading must be in the gate's list (triage/probe/load_files.py) under a name the gate
judges, or be a pointer (`latest`, `latest_universal`) the gate reads itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import probe_checkpoints as pc
from tests.hostile import payloads
from tests.repair_support import ext_env
from triage.probe import load_files, trust, zipcheck

pytestmark = pytest.mark.slow

ROOT = pc.ROOT
LOADED = ("z2-dp2-fp32", "z3-dp2-fp32", "z1-dp2-bf16")  # a real load each (plus the universal one)
CONVERTED = LOADED + ("z2-dp2-bf16",)  # zero_to_fp32 and ds_to_universal each, in one process
TRACE = "DS_TRIAGE_OPEN_TRACE"

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

CONVERT = '''
import json, os, sys
from deepspeed.checkpoint import ds_to_universal
from triage.repair import fp32
for root, tag, fp32_out, universal_out, inject in json.loads(sys.argv[1]):
    fp32.main([root, fp32_out, "--tag", tag])
    sys.argv = ["ds_to_universal", "--input_folder", os.path.join(root, tag), "--output_folder", universal_out,
                "--num_extract_workers", "1", "--num_merge_workers", "1"] + (["--inject_missing_state"] if inject else [])
    ds_to_universal.main(ds_to_universal.parse_arguments())
'''


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> tuple[Path, dict[str, Path]]:
    """Copies of the baselines, the converters and the real loads run over them, traced. Returns the
    trace dir and the checkpoint roots by name (`universal`: the converted z2-dp2-fp32)."""
    base = tmp_path_factory.mktemp("traces")
    trace, hook = base / "trace", base / "hook"
    trace.mkdir()
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = dict(os.environ, **ext_env(), PYTHONPATH=os.pathsep.join([str(hook), str(ROOT)]), **{TRACE: str(trace)})
    roots = {name: payloads.copy_baseline(name, base / name) for name in CONVERTED}
    jobs = [[str(roots[n]), payloads.TAG, str(base / "fp32" / n), str(base / "universal" / n / f"{payloads.TAG}_universal"),
             not n.startswith("z3")] for n in CONVERTED]
    proc = subprocess.run([sys.executable, "-c", CONVERT, json.dumps(jobs)], env=dict(env, DS_TRIAGE_TRACE_ALL="1"),
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    universal = base / "universal" / "z2-dp2-fp32"  # ds_to_universal wrote latest_universal here
    (universal / "latest").write_text(f"{payloads.TAG}_universal")  # so the load reads a pointer: latest_universal
    roots["universal"] = universal
    config = base / "universal.json"
    config.write_text(json.dumps({"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2},
                                  "checkpoint": {"load_universal": True}}))
    for name in LOADED + ("universal",):
        _real_load(roots[name], config if name == "universal" else None, env)
    return trace, roots


def _real_load(root: Path, config: Path | None, env: dict) -> None:
    """The reproduce probe (gate, then DeepSpeed's own load under torchrun), in this process; the
    ranks inherit the trace through the environment."""
    from triage.probe.checks import reproduce
    from triage.probe.context import ProbeContext
    from triage.probe.target import from_args

    old = dict(os.environ)
    os.environ.update({k: env[k] for k in ("PYTHONPATH", TRACE, "TORCH_EXTENSIONS_DIR", "DS_ACCELERATOR")})
    try:
        ctx = ProbeContext.for_path(str(root), from_args(None, None, str(config) if config else None), reproduce=True)
        result = reproduce.probe(ctx)
    finally:
        os.environ.clear()
        os.environ.update(old)
    assert result.status == "refuted", (root, result.summary, result.evidence)  # the load passed


def _opened(trace: Path, root: Path) -> set[str]:
    prefix = str(root) + os.sep
    paths = {line for f in trace.glob("*.txt") for line in f.read_text().splitlines()}
    return {p for p in paths if p.startswith(prefix) and os.path.isfile(p)}


def _judged(path: str) -> bool:
    """Whether the gate judges this file (trust.judge does not pass it over)."""
    with open(path, "rb") as f:
        head = f.read(len(zipcheck.LEGACY_MAGIC))
    return load_files.loadable(os.path.basename(path)) or head.startswith(trust.TORCH_MAGIC)


@pytest.mark.parametrize("name", LOADED + ("z2-dp2-bf16", "universal"))
def test_every_file_deepspeed_opened_is_in_the_gates_list(traced, name):
    trace, roots = traced
    root = roots[name]
    opened = _opened(trace, root)
    found = load_files.discover(str(root))
    listed = {os.path.realpath(f) for f in found.files}
    assert opened, f"the trace saw no file of {root} opened"
    missed = sorted(p for p in opened if p not in found.pointers and not (os.path.realpath(p) in listed and _judged(p)))
    assert not missed, missed
    assert not found.refused and trust.scan_load(str(root)).untrusted == []  # healthy, and seen so
    shards = {p for p in opened if p.endswith(".pt")}
    if name == "universal":  # the universal load read zero/, through latest_universal
        assert os.path.join(root, "latest_universal") in opened
        assert any(f"{os.sep}zero{os.sep}" in p for p in shards) and found.tags == [f"{payloads.TAG}_universal"]
    else:  # the engine and the converters between them read every shard of the tag
        assert shards == {f for f in found.files if f.endswith(".pt")}, shards
