"""Launch triage/repair/load_check.py under torchrun and read what each rank reported."""

from __future__ import annotations

import glob
import json
import os
import shlex
import shutil
import tempfile
from dataclasses import dataclass, field

from triage.errors import TimedOut
from triage.repair.plan import LoadSpec
from triage.repair.tools import PYTHON, run_live, tail

TIMEOUT = 1800
MAX_OUTPUT = 4 << 20  # characters of output kept for the classifier: head and tail


@dataclass
class LoadResult:
    ok: bool
    mode: str
    world_size: int
    config_source: str
    command: str
    seconds: float
    detail: str
    load_path: str | None = None
    global_steps: int | None = None
    checksum: float | None = None
    notes: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)  # the last lines of its output, when it failed
    output: str = ""  # the whole combined output (up to MAX_OUTPUT), when asked for

    def to_json(self) -> dict:
        return {"ran": True, "ok": self.ok, "mode": self.mode, "world_size": self.world_size,
                "config_source": self.config_source, "command": self.command, "seconds": round(self.seconds, 1),
                "detail": self.detail, "load_path": self.load_path, "global_steps": self.global_steps,
                "checksum": self.checksum, "notes": self.notes, "log": self.log}


def command(spec_path: str, result_path: str, world_size: int) -> list[str]:
    return [PYTHON, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={world_size}",
            "-m", "triage.repair.load_check", spec_path, result_path]


def run(spec: LoadSpec, factory: str | None, timeout: float | None = None, *, twin: list | None = None,
        reraise: bool = False, optimizer: str | None = None, label: str = "") -> LoadResult:
    """Load spec's checkpoint with real DeepSpeed on spec.world_size ranks; never raises for a failed
    load, TimedOut past `timeout` seconds (default TIMEOUT: torchrun and its ranks are killed).

    factory None: the model is the twin of the saved param shapes (triage/repair/twin.py); optimizer:
    the torch.optim class to build when neither the factory nor the ds_config gives one. reraise: a
    failing rank prints its traceback as the job would, and the result keeps the whole output.
    DeepSpeed's output is shown on stderr as it comes when progress is on (triage/progress/)."""
    limit = timeout or TIMEOUT
    work = tempfile.mkdtemp(prefix="ds-triage-load-check-")
    try:
        spec_path, result_path = os.path.join(work, "spec.json"), os.path.join(work, "result")
        with open(spec_path, "w", encoding="utf-8") as f:
            json.dump({"factory": factory, "twin": twin, "reraise": reraise, "mode": spec.mode,
                       "load_dir": spec.load_dir, "tag": spec.tag, "config": spec.config,
                       "state_dict": spec.state_dict, "optimizer": optimizer}, f)
        argv = command(spec_path, result_path, spec.world_size)
        shown = " ".join(shlex.quote(a) for a in argv[:5]) + " -m triage.repair.load_check ..."
        ran = run_live(argv, limit, label or f"DeepSpeed load on {spec.world_size} rank(s)", keep=MAX_OUTPUT)
        if ran.code is None:
            raise TimedOut(f"the real DeepSpeed load ({shown}) ran past the time limit of {limit:g} s and was "
                           f"stopped: {ran.killed} process(es) killed (torchrun and the ranks it had started); nothing was "
                           "concluded about the load. Give it longer with --timeout SECONDS (the first run on a machine "
                           "also builds DeepSpeed's CPU comm op: a minute or more)")
        ranks = [_read(p) for p in sorted(glob.glob(result_path + ".*"))]
        result = _result(spec, shown, ran.seconds, ran.code, ran.output, ranks, limit)
        if reraise:
            result.output = ran.output
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _read(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _result(spec: LoadSpec, shown: str, seconds: float, code, output: str, ranks: list[dict],
            timeout: int) -> LoadResult:
    base = dict(mode=spec.mode, world_size=spec.world_size, config_source=spec.config_source, command=shown,
                seconds=seconds)
    failed = [r for r in ranks if not r.get("ok")]
    notes = []
    if code != 0 and code != "timeout" and len(ranks) == spec.world_size and not failed:
        # Every rank finished the load (and the step) and wrote its result; a rank died after
        # that, in the process group's teardown: not the checkpoint's doing.
        notes.append(f"every rank reported success, then torchrun exited {code} (a rank died at teardown)")
        code = 0
    if code == 0 and len(ranks) == spec.world_size and not failed:
        first = ranks[0]
        what = {"state-dict": "load_state_dict(strict=True) + deepspeed.initialize",
                "module-only": "engine.load_checkpoint(load_module_only=True)"}.get(spec.mode, "engine.load_checkpoint")
        if first.get("step_loss") is not None:
            what += " + one training step"
        detail = f"{what} passed on {spec.world_size} rank(s)" + (
            f": loaded {first['load_path']} at global step {first['global_steps']}" if first.get("load_path") else "") + (
            f"; param checksum {first['checksum']:.6f}" if first.get("checksum") is not None else "")
        return LoadResult(ok=True, detail=detail, load_path=first.get("load_path"),
                          global_steps=first.get("global_steps"), checksum=first.get("checksum"),
                          notes=first.get("notes", []) + notes, **base)
    if failed:
        detail = failed[0]["error"]
    elif code == "timeout":
        detail = f"timed out after {timeout} s"
    else:
        detail = f"exited {code} with {len(ranks)} of {spec.world_size} rank(s) reporting"
    return LoadResult(ok=False, detail=detail, log=tail(output), **base)
