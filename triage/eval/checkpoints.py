"""`ds-triage eval --with-checkpoints`: the gate on a log plus its checkpoint (issue 19).

A small real subset of the corpus is made again, here and now, by the corpus generator
(corpus/generate.py, a checkout with torch and DeepSpeed): each scenario's baseline trained and
saved by real DeepSpeed (once per layout and release: kept in `baselines`, by default
~/.cache/ds-triage-corpus/eval-baselines/<fingerprint>, for the next run), copied, its fault injected,
its load run under torchrun on CPU and its log recorded. Then `ds-triage triage --log LOG --ckpt
CKPT --json` runs on each, as on-call would run it (cases loaded as another user with --as-user
for that user, when run as root). Scored:

* right: the verdict's answer (`verdict.category`, confirmed or likely) is the scenario's category;
* confirmed: it is, and `verdict.status` is `confirmed`;
* healthy flagged: a scenario that loads fine whose triage has a finding or a confirmed verdict;
* silent faults (deep=True): triaged with --deep, and `verify --deep` of the dir the job loaded
  must fail (exit 1).

Then every corpus case whose checkpoint is committed (corpus/kept.py: the baselines saved through
transformers, TRL, accelerate and PEFT, and by older DeepSpeed / torch releases, whose venvs CI does
not build) is unpacked with its own fault steps and triaged with its real log, scored the same way.

SUBSET is the data: one entry per corpus scenario id (corpus/scenarios.py) or silent fault of
the checkpoint (corpus/silent.py: made from its baseline, then resumed by real DeepSpeed, which
prints nothing wrong: that resume's log is the one triaged), whose category (or kind `clean`:
healthy) is the expectation. A new case is a line; the silent faults are entries with deep=True.
The full kept corpus stays a benchmark (benchmarks/eval_triage.py), as does everything here that
is slower than the gate needs.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from triage.errors import BadInput
from triage.eval.evaluate import Gate

RIGHT_MIN = 0.98  # issue 19: the answer right for >= 98% of failing loads
CONFIRMED_MIN = 0.90  # ... and confirmed for >= 90%
HEALTHY = None  # the expectation of a scenario that loads fine
JOBS = 2  # scenarios made at once, at most one per core: on a shared machine each gets its own share


@dataclass(frozen=True)
class Entry:
    id: str  # a corpus scenario id (corpus/scenarios.py)
    deep: bool = False  # a silent fault: triage --deep (reading every byte finds some), and verify must fail
    with_model: bool = False  # triage and verify get --model: the names and shapes of the model the load built


# Every category the corpus has with checkpoints, the parallel and precision facts the probes
# read from the log (mp size, pipeline engine), and a healthy one. One case a category and
# mechanism: the older release pairs' committed checkpoints bring the same faults
# again (a deleted model-states file, a stage-0 checkpoint under stage 2, ...), and the launch
# command read for the world size is tests/test_probe_settings.py's.
SUBSET = (
    Entry("zero2-dp2-optim-shard-deleted"),  # missing_file
    Entry("zero3-dp2-latest-deleted", deep=True),  # missing_file, silent: load_checkpoint returns (None, None)
    Entry("zero2-dp1-load-parent-dir", deep=True),  # missing_file, silent: the load dir one level up
    Entry("killed-save-zero2-load-explicit-tag"),  # partial_checkpoint
    Entry("zero2-dp1-tag-dir-unreadable"),  # permission_denied (loaded as uid 65534)
    Entry("zero2-dp2-optim-shard-truncated"),  # corrupt_file
    Entry("torch-load-zero2-optim-shard"),  # unsafe_load_blocked
    Entry("zero1-dp1-optim-ds-version-removed"),  # version_incompatible
    Entry("zero3-saved-stage2-load-dp2"),  # zero_stage_mismatch
    Entry("zero2-dp2-saved-load-dp1"),  # parallelism_mismatch: dp
    Entry("tp2-saved-load-dp2"),  # parallelism_mismatch: mp_world_size (the world size is the same)
    Entry("pp2-saved-load-no-pipeline"),  # parallelism_mismatch: layer files, no PipelineEngine
    Entry("zero2-dp2-fp32-saved-bf16-load"),  # config_mismatch: precision
    Entry("zero2-dp1-model-hidden-changed"),  # model_mismatch
    Entry("zero2-dp1-adamw-saved-sgd-load"),  # optimizer_mismatch
    Entry("zero2-dp2-load-sigkill"),  # out_of_memory
    Entry("ds_to_universal-zero2-dp2-without-inject-missing-state"),  # known_bug
    # silent faults of the checkpoint (corpus/silent.py; corrupt_file): a resume prints nothing wrong
    Entry("z2-dp2-fp32-optim-shards-swapped", deep=True),  # two ranks' optimizer shards exchanged
    Entry("z3-dp2-fp32-optim-shard-from-later-save", deep=True),  # one rank's shard from a later save
    # silent in the load, not the checkpoint: a renamed module loaded with strict=False; only the model
    # the job builds (--model) can tell
    Entry("zero2-dp1-model-renamed-nonstrict-module-only", deep=True, with_model=True),
    # healthy: one made again, saved "by 0.99.0", which loads without a word (what a new DeepSpeed
    # would change first). The others (plain resumes on every layout, a tp-2 resume, dp 2 -> 1
    # without optimizer states) are triaged with their real logs by the suite's healthy-checkpoint
    # test, and the gate has the committed ones (frameworks, older releases).
    Entry("zero2-dp1-optim-ds-version-newer"),
)

# With committed_logs, the scenarios still loaded here: a failing load and a healthy one, the canary that
# the installed DeepSpeed still fails (or loads) as the committed logs say. The silent faults' resumes
# always run: their logs are not committed (a resume that prints nothing is the point).
CANARIES = ("zero3-saved-stage2-load-dp2", "zero2-dp1-optim-ds-version-newer")


@dataclass
class Outcome:
    id: str
    expected: str | None  # the category; None: healthy
    status: str = "error"  # verdict.status, or "error" when triage gave no report
    category: str = "unknown"
    rule_id: str | None = None
    findings: list[str] = field(default_factory=list)
    exit_code: int | None = None
    deep: bool = False  # a silent fault (Entry.deep): scored by the silent_faults_found gate too
    seconds: float = 0.0  # making the scenario (its load) and triaging it
    error: str = ""
    verify_failed: bool | None = None  # a silent fault: `verify --deep` exited 1 (None: not asked)

    @property
    def right(self) -> bool:
        return self.expected is not None and self.category == self.expected

    @property
    def confirmed(self) -> bool:
        return self.right and self.status == "confirmed"

    @property
    def flagged(self) -> bool:
        return self.expected is None and (bool(self.findings) or self.status in ("confirmed", "error"))

    def to_json(self) -> dict:
        return {"id": self.id, "expected": self.expected, "status": self.status, "category": self.category,
                "rule_id": self.rule_id, "findings": list(self.findings), "right": self.right,
                "confirmed": self.confirmed, "flagged": self.flagged, "seconds": round(self.seconds, 1),
                "error": self.error, "verify_failed": self.verify_failed}


@dataclass
class CheckpointEval:
    outcomes: list[Outcome]
    seconds: float

    @property
    def failing(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.expected is not None]

    @property
    def healthy(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.expected is None]

    def counts(self) -> tuple[int, int, int, int, int]:
        failing, healthy = self.failing, self.healthy
        return (len(failing), sum(o.right for o in failing), sum(o.confirmed for o in failing),
                len(healthy), sum(o.flagged for o in healthy))

    @property
    def gates(self) -> list[Gate]:
        n, right, confirmed, h, flagged = self.counts()
        if not n:
            return [Gate("checkpoints_right", False, "no failing scenario with a checkpoint to measure")]
        gates = [
            Gate("checkpoints_right", right / n >= RIGHT_MIN,
                 f"answer right {right}/{n} {'>=' if right / n >= RIGHT_MIN else '<'} {RIGHT_MIN}"),
            Gate("checkpoints_confirmed", confirmed / n >= CONFIRMED_MIN,
                 f"confirmed {confirmed}/{n} {'>=' if confirmed / n >= CONFIRMED_MIN else '<'} {CONFIRMED_MIN}"),
            Gate("healthy_not_flagged", flagged == 0, f"{flagged} of {h} healthy checkpoints flagged"),
        ]
        silent = [o for o in self.outcomes if o.deep]
        if silent:
            missed = [o.id for o in silent if not (o.confirmed and o.verify_failed)]
            gates.append(Gate("silent_faults_found", not missed,
                              f"{len(silent) - len(missed)} of {len(silent)} silent faults confirmed and failing "
                              "verify" + (f"; not: {', '.join(missed)}" if missed else "")))
        return gates

    @property
    def passed(self) -> bool:
        return all(g.passed for g in self.gates)

    def to_json(self) -> dict:
        n, right, confirmed, h, flagged = self.counts()
        return {
            "scenarios": len(self.outcomes), "failing": n, "right": right, "confirmed": confirmed,
            "right_rate": round(right / n, 4) if n else None, "confirmed_rate": round(confirmed / n, 4) if n else None,
            "healthy": h, "healthy_flagged": flagged, "seconds": round(self.seconds, 1),
            "gates": {"passed": self.passed, "right_min": RIGHT_MIN, "confirmed_min": CONFIRMED_MIN,
                      "checks": [g.to_json() for g in self.gates]},
            "outcomes": [o.to_json() for o in self.outcomes],
        }


def render(result: CheckpointEval) -> list[str]:
    n, right, confirmed, h, flagged = result.counts()
    out = [f"with checkpoints: {len(result.outcomes)} scenarios made again and triaged (log + checkpoint) "
           f"in {result.seconds:.0f} s"]
    for o in result.outcomes:
        if o.expected is None:
            mark = "FLAGGED" if o.flagged else "healthy"
            what = f"{o.status} {o.category}" + (f", findings {', '.join(o.findings)}" if o.findings else "")
        else:
            mark = "confirmed" if o.confirmed else "right" if o.right else "WRONG"
            what = f"{o.status} {o.category} {o.rule_id or ''}".rstrip() + f" (expected {o.expected})"
        if o.deep:
            what += "; verify --deep " + ("failed, as it must" if o.verify_failed else "PASSED (a silent fault it missed)")
        out.append(f"  {mark:9s} {o.id}: {what}" + (f"; {o.error}" if o.error else ""))
    pct = (lambda a, b: f"{a / b:.1%}" if b else "-")
    out.append(f"  answer right {right}/{n} ({pct(right, n)}), confirmed {confirmed}/{n} ({pct(confirmed, n)}), "
               f"healthy flagged {flagged}/{h}")
    return out


# ---------------------------------------------------------------- making the subset and triaging it

def checkpoint_of(case: dict, ckpts: Path, loaded: bool = False) -> Path | None:
    """The checkpoint a corpus case's command loaded (converters name theirs), else its kept dir;
    loaded: the dir its load was given (`--load-dir`, a Trainer's checkpoint-N), first."""
    command = case.get("command", "")
    m = re.search(r"--input_folder\s+(\S+)|zero_to_fp32\.py\s+(\S+)", command)
    named = next((g for g in (m.groups() if m else ()) if g), None)
    load_dir = re.search(r"--load-dir\s+(\S+)", command) if loaded else None
    for path in (Path(named) if named else None, Path(load_dir.group(1)) if load_dir else None, ckpts / case["id"]):
        if path is not None and path.exists():
            return path
    return None


def as_user(case: dict) -> list[str]:
    """The user a corpus case's load ran as (setpriv --reuid), as an on-call root passes it."""
    m = re.match(r"setpriv --reuid=(\d+)(?: --regid=(\d+))?", case.get("command", ""))
    if not m or os.geteuid() != 0:
        return []
    return ["--as-user", m.group(1) + (f":{m.group(2)}" if m.group(2) else "")]


def _generator():
    """corpus/generate.py from the checkout this package runs from (it is not in the wheel)."""
    from triage.kb.index import REPO_ROOT

    if not (Path(REPO_ROOT) / "corpus" / "generate.py").is_file():
        raise BadInput("--with-checkpoints makes its scenarios with corpus/generate.py: run it from a checkout")
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    try:
        from corpus import generate, runner, silent
        from corpus.scenarios import SCENARIOS
    except ImportError as exc:  # torch, deepspeed or yaml missing
        raise BadInput(f"--with-checkpoints needs torch and DeepSpeed (pip install '.[probe]'): {exc}") from None
    return generate, runner, silent, {s["id"]: s for s in SCENARIOS + silent.SILENT}


def default_baselines() -> Path:
    """Where the trained baselines are kept between runs: one dir per DeepSpeed and torch release and
    worker code (corpus.generate.baseline_fingerprint), so only the first run trains them."""
    generate, _, _, _ = _generator()
    return Path.home() / ".cache" / "ds-triage-corpus" / "eval-baselines" / generate.baseline_fingerprint()


def run(entries=SUBSET, work: Path | None = None, baselines: Path | None = None, log=None,
        committed_logs: bool = False) -> CheckpointEval:
    """Make each entry's scenario in `work` (a temporary dir by default, removed afterwards), with the
    baselines trained once in `baselines` (default: default_baselines()), and triage it. committed_logs:
    a scenario with a committed corpus log and no step before its load (but CANARIES) is not loaded: its
    checkpoint is made (baseline copied, fault injected) and triaged with that log, as the committed
    framework and older-release cases are."""
    generate, runner, silent, table = _generator()
    unknown = [e.id for e in entries if e.id not in table]
    if unknown:
        raise BadInput(f"not corpus scenarios: {', '.join(unknown)}")
    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    temporary = work is None
    work = Path(tempfile.mkdtemp(prefix="ds-triage-eval-")) if temporary else Path(work)
    started = time.monotonic()
    try:
        work.mkdir(parents=True, exist_ok=True)
        work.chmod(0o755)  # the scenarios loaded as another user must reach their copies
        base = Path(baselines) if baselines else default_baselines()
        base.mkdir(parents=True, exist_ok=True)
        base.chmod(0o755)
        runner.EXT_DIR["path"] = str(generate.EXT_CACHE)
        # what the corpus code imports prints to stdout (DeepSpeed's logger, when a fault step unpickles
        # its objects): to stderr, so that --json stays the only thing on stdout
        with contextlib.redirect_stdout(sys.stderr), open(base / ".lock", "w") as lock, \
                ThreadPoolExecutor(max(1, min(JOBS, os.cpu_count() or 1))) as pool:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another run training the same baselines: wait for it
            generate.warm_up_ops(work)
            # every baseline first (a scenario only copies its own; those of one world size in one
            # launch), then the scenarios side by side:
            # each is its own copy, log and rendezvous port (corpus/runner.py)
            generate.build_bases([table[e.id]["layout"] for e in entries if table[e.id].get("layout")], base)
            # trained: from here on they are only copied, and a run that finds them kept trains none
            # (so it need not wait for this one's scenarios)
            fcntl.flock(lock, fcntl.LOCK_UN)
            # the longest first (those with a training run before their load), so no lane idles at the end
            longest_first = sorted(entries, key=lambda e: not table[e.id].get("pre"))
            done = dict(zip(longest_first, pool.map(
                lambda e: _one(e, table[e.id], (generate, runner, silent), work, base, log,
                                 committed_logs and e.id not in CANARIES), longest_first)))
            outcomes = [done[e] for e in entries]
            outcomes += committed(work / "committed", pool, log)
    finally:
        if temporary:
            _remove(work)
    return CheckpointEval(outcomes, time.monotonic() - started)


def _one(entry: Entry, scenario: dict, corpus, work: Path, base: Path, log, committed_log: bool = False) -> Outcome:
    generate, runner, silent = corpus
    case = _manifest().get(scenario["id"]) if committed_log and not scenario.get("pre") else None
    expected = HEALTHY if scenario["kind"] == "clean" else scenario["category"]
    outcome = Outcome(entry.id, expected, deep=entry.deep)
    started = time.monotonic()
    try:
        if case is not None:
            ckpt, loaded, log_path, user = _made_without_load(scenario, case, generate, work, base)
        elif any(scenario["id"] == s["id"] for s in silent.SILENT):
            ckpt, loaded, log_path, user = _make_silent(scenario, silent, generate, runner, work, base)
        else:
            case = generate.run_scenario(scenario, work, base, work / "out", True)
            ckpt, loaded = checkpoint_of(case, work), checkpoint_of(case, work, loaded=True)
            log_path, user = work / "out" / case["log"], as_user(case)
    except (Exception, SystemExit) as exc:  # a setup step that failed: this scenario scores as an error
        outcome.error = f"not made: {exc}"
        log(f"{entry.id}: {outcome.error}")
        return outcome
    if ckpt is None:
        outcome.error = "no checkpoint kept"
    else:
        model = _model_file(scenario, runner, work) if entry.with_model else []
        _triage(outcome, log_path, ckpt, user + (["--deep"] if entry.deep else []) + model)
        if entry.deep:
            outcome.verify_failed = _verify_fails(ckpt, loaded or ckpt, model)
    outcome.seconds = time.monotonic() - started
    log(f"{entry.id}: {outcome.status} {outcome.category} ({outcome.seconds:.0f} s)")
    return outcome


def committed(work: Path, pool, log) -> list[Outcome]:
    """Every corpus case whose checkpoint is a committed baseline (corpus/kept.py: saved through a
    framework or by an older release pair, whose venvs CI does not build) that needs no step of its
    job's own venv: unpacked with its fault steps and triaged with its real log. No DeepSpeed run but
    a silent fault's `verify --deep`. Triaged here, one after another: ~150 checkpoints, each a tenth
    of a second in this process and three times that as a command (the command is what the scenarios
    made above run)."""
    from corpus import kept

    cases = [c for c in kept.committed_cases(kinds=("failure", "silent", "clean")) if kept.archive_of(c["id"]).exists()]
    made = list(pool.map(lambda case: _unpack(case, kept, work, log), cases))
    for outcome, dirs in made:
        if dirs:
            _triage_here(outcome, *dirs[:2], dirs[3])
    deep = [(outcome, dirs) for outcome, dirs in made if dirs and outcome.deep]
    for (outcome, dirs), failed in zip(deep, pool.map(lambda m: _verify_fails(m[1][1], m[1][2]), deep)):
        outcome.verify_failed = failed
    return [outcome for outcome, _ in made]


def _unpack(case: dict, kept, work: Path, log) -> tuple[Outcome, tuple | None]:
    """(its outcome to fill, (the log, the dir to triage, the dir its load was given, triage's options)),
    unpacked with its fault steps; no dirs when that failed."""
    deep = case["kind"] == "silent"
    outcome = Outcome(case["id"], HEALTHY if case["kind"] == "clean" else case["expected_category"], deep=deep)
    started = time.monotonic()
    try:
        root = kept.unpack(case, work / case["id"])
        ckpt, loaded = kept.given(case, root), kept.given(case, root, loaded=True)
    except (Exception, SystemExit) as exc:
        outcome.error = f"not made: {exc}"
        log(f"{case['id']}: {outcome.error}")
        return outcome, None
    outcome.seconds = time.monotonic() - started
    # healthy: the dir its load was given, as the healthy benchmark does (a Trainer's output dir); a
    # failure: its checkpoint, and the dir the job gave its load as on-call reads it from the job's
    # command line, when that is another (one level off, say)
    options = as_user(case) + (["--deep"] if deep else [])
    if case["kind"] == "clean":
        ckpt = loaded
    elif loaded != ckpt:
        options += ["--load-dir", str(loaded)]
    return outcome, (Path(kept.CORPUS) / case["log"], ckpt, loaded, options)


def _manifest() -> dict[str, dict]:
    from triage.kb.source import load_yaml

    from corpus import kept

    return {c["id"]: c for c in load_yaml((Path(kept.CORPUS) / "manifest.yaml").read_text())}


def _made_without_load(scenario: dict, case: dict, generate, work: Path, base: Path):
    """A scenario's checkpoint as its job left it before the load (its baseline copied, its fault
    injected), and its committed corpus log: (checkpoint, the dir loaded, the log, triage's options)."""
    from corpus import faults, kept
    from corpus.layouts import LAYOUTS

    generate.build_base(scenario["layout"], base, False)
    holder = work / "from-corpus" / scenario["id"]  # alone in its dir: a load one level up sees only it
    holder.mkdir(parents=True)
    for path in (holder.parent, holder):
        path.chmod(0o755)  # the scenarios loaded as another user must reach their copies
    root = holder / scenario["layout"]
    shutil.copytree(base / scenario["layout"], root, symlinks=True)
    if scenario.get("user") == "nobody":
        faults.make_world_readable(str(root))
    if scenario.get("inject"):
        faults.apply(str(root / LAYOUTS[scenario["layout"]].get("sub", "")), scenario["inject"])
    ckpt, loaded = kept.given(case, root), kept.given(case, root, loaded=True)
    # the committed log names the paths of the generator's run, not these: the dir the job gave its load,
    # when another, is read from the job's command line, as for the committed cases (_unpack)
    options = as_user(case) + (["--load-dir", str(loaded)] if loaded != ckpt else [])
    return ckpt, loaded, Path(kept.CORPUS) / case["log"], options


def _make_silent(entry: dict, silent, generate, runner, work: Path, base: Path):
    """A corpus/silent.py fault made from its baseline, then resumed by real DeepSpeed (corpus/workers/
    load.py under torchrun), which exits 0 and prints nothing wrong: (checkpoint, the dir loaded,
    that resume's log, no --as-user)."""
    generate.build_base(entry["layout"], base, False)
    ckpt = silent.build(entry, base, work / entry["id"])
    log_path = work / "out" / "silent" / f"{entry['id']}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    rc = runner.run(silent.load_command(entry, ckpt), {}, log_path)
    if rc != 0:
        raise RuntimeError(f"the resume exited {rc} (a silent fault loads without error): see {log_path}")
    return ckpt, ckpt, log_path, []


def _model_file(scenario: dict, runner, work: Path) -> list[str]:
    """["--model", JSON]: the names and shapes of the worker model variant the scenario's load built
    (corpus/workers/model_shapes.py), as the job's owner would describe their model."""
    from triage.kb.index import REPO_ROOT

    out = work / f"{scenario['id']}.model.json"
    variant = scenario.get("args", {}).get("model", "base")
    # its output captured: what torch or DeepSpeed print on import must not reach the --json report
    proc = subprocess.run([runner.PY, str(Path(REPO_ROOT) / "corpus" / "workers" / "model_shapes.py"), variant,
                           str(out)], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:  # a bug here: the run stops with the worker's own traceback
        raise RuntimeError(f"model_shapes.py {variant} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return ["--model", str(out)]


def _verify_fails(ckpt: Path, loaded: Path, options: list[str] = ()) -> bool:
    """`ds-triage verify --deep --load-dir LOADED CKPT` exits 1: the gate after a save, told the dir the
    job loads (and, with_model, the model it builds), catches it."""
    from triage.kb.index import REPO_ROOT

    command = [sys.executable, "-m", "triage", "verify", str(ckpt), "--deep", "--load-dir", str(loaded), "--json",
               *options]
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT, timeout=600).returncode == 1


def _triage(outcome: Outcome, log_path: Path, ckpt: Path, options: list[str]) -> None:
    from triage.kb.index import REPO_ROOT

    command = [sys.executable, "-m", "triage", "triage", "--log", str(log_path), "--ckpt", str(ckpt), "--json",
               *options]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT, timeout=600)
    outcome.exit_code = proc.returncode
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        outcome.error = f"triage exited {proc.returncode}: {proc.stderr.strip().splitlines()[-1:] or ''}"
        return
    verdict = data["verdict"]
    outcome.status, outcome.category, outcome.rule_id = verdict["status"], verdict["category"], verdict["rule_id"]
    outcome.findings = list(data.get("findings", []))


def _triage_here(outcome: Outcome, log_path: Path, ckpt: Path, options: list[str]) -> None:
    """_triage in this process: `ds-triage triage ... --json`'s report without a new interpreter."""
    from triage.cli import build_parser, parse
    from triage.cli.triage import triaged

    started = time.monotonic()
    argv = ["triage", "--log", str(log_path), "--ckpt", str(ckpt), "--json", *options]
    try:
        data = triaged(parse(build_parser("triage"), argv))[3].to_json()
    except (Exception, SystemExit) as exc:  # what the command would have exited non-zero on
        outcome.error = f"triage failed: {type(exc).__name__}: {exc}"
        return
    finally:
        outcome.seconds = (outcome.seconds or 0) + time.monotonic() - started
    verdict = data["verdict"]
    outcome.status, outcome.category, outcome.rule_id = verdict["status"], verdict["category"], verdict["rule_id"]
    outcome.findings = list(data.get("findings", []))


def _remove(path: Path) -> None:
    for dirpath, dirnames, _ in os.walk(path):  # the permission scenarios leave closed dirs behind
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o755)
    shutil.rmtree(path, ignore_errors=True)
