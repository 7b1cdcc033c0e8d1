"""Generate the real failure corpus: python -m corpus.generate [--only GLOB] [--keep DIR] [--list]

Trains tiny models with real DeepSpeed, saves baseline checkpoints once per layout (cached under
<work>/_base), copies one per scenario, injects the fault, runs the real loading path and stores
the full combined stdout+stderr untouched in <out>/cases|clean/<id>.log plus <out>/manifest.yaml.
With --deepspeed V --torch V the runs use a cached venv of that release pair (corpus/releases.py)
and go to <out>/releases/<pair>/cases|clean/<id>.log, as manifest entries `<id>@<pair>`.
"""
import argparse
import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from corpus import faults, layouts as L, logtools, releases, runner
from corpus.scenarios import SCENARIOS
from triage import progress
from triage.kb.source import load_yaml

CORPUS = Path(__file__).resolve().parent
DEFAULT_WORK = Path("/tmp/ds-triage-corpus")
# One build cache per venv, keyed by its path as the workers see it: another venv's DeepSpeed sits
# at another path, which changes the build flags (its include dirs), so two venvs (two checkouts'
# .venv included) sharing one cache rebuild the op for each other, and a load killed mid-build (a
# --timeout test) leaves torch's build lock behind, on which every later load in that cache waits
# forever. Not the real path: checkouts whose .venv links to one venv still build with their own
# link's path (/work/a/.venv/lib/...), so one cache for them all is rebuilt by each in turn.
def ext_cache():
    seen = os.path.abspath(runner.VENV)
    return Path.home() / ".cache" / "ds-triage-corpus" / (
        f"torch_extensions-{runner.VENV.name}-{hashlib.sha1(seen.encode()).hexdigest()[:8]}")


EXT_CACHE = ext_cache()
QUIET = {"on": False}
PAIR = {"name": None}   # the release pair being generated (--deepspeed/--torch), else None


def say(line):
    """A line of the generation log on stderr (none under -q), above the meter when one is drawn."""
    if QUIET["on"]:
        return
    if progress.shown():
        progress.write(line)
    else:
        print(line, file=sys.stderr, flush=True)


def versions(cache={}):
    """(deepspeed, torch) releases the workers run: this process's, or those of another venv."""
    if runner.VENV.resolve() == Path(sys.prefix).resolve() or not Path(runner.PY).exists():
        import importlib.metadata as md
        return md.version("deepspeed"), str(__import__("torch").__version__)
    if runner.PY not in cache:
        code = "import importlib.metadata as m, torch; print(m.version('deepspeed'), torch.__version__)"
        cache[runner.PY] = tuple(subprocess.run([runner.PY, "-c", code], capture_output=True, text=True,
                                                check=True, env=runner.base_env()).stdout.split()[-2:])
    return cache[runner.PY]


def parse(argv=None):
    p = argparse.ArgumentParser(prog="python -m corpus.generate", description=__doc__.splitlines()[0])
    p.add_argument("--only", action="append", help="fnmatch glob(s) over scenario ids (repeatable, or a,b)")
    p.add_argument("--keep", type=Path, help="keep faulted checkpoints under DIR/<id>/, baselines in DIR/_base/")
    p.add_argument("--out", type=Path, default=CORPUS, help="where cases/, clean/, manifest.yaml go")
    p.add_argument("--list", action="store_true", help="list scenario ids and exit")
    p.add_argument("--reindex", action="store_true",
                   help="rewrite manifest entries of already generated logs from the table (no runs)")
    p.add_argument("--rebuild", action="store_true", help="retrain baseline layouts even if cached")
    p.add_argument("--progress", action="store_true",
                   help="a meter of the scenarios done on stderr even when it is not a terminal (default: on a terminal)")
    p.add_argument("-q", "--quiet", action="store_true", help="only errors and the last line on stderr")
    p.add_argument("--deepspeed", type=releases.check_version, metavar="VERSION",
                   help="run in a cached venv of this DeepSpeed release (with --torch); default scenarios: "
                   "the release matrix (corpus/releases.py)")
    p.add_argument("--torch", type=releases.check_version, metavar="VERSION", help="the torch release of that venv")
    p.add_argument("--missing", action="store_true",
                   help="skip the chosen scenarios that already have a manifest entry and its log (finish a run "
                   "that was cut short)")
    return check(p, p.parse_args(argv))


def check(p, args):
    if (args.deepspeed is None) != (args.torch is None):
        p.error("--deepspeed and --torch go together: a venv is built per release pair")
    return args


def select(only, pair=None):
    """The scenarios to run: `only`'s globs, else all of them, or on a release pair (its name, or True
    for any pair) the release matrix. A scenario with a `pair` key belongs to that pair alone."""
    table = [s for s in SCENARIOS if not s.get("pair") or s["pair"] == pair]
    if not only:
        return [s for s in table if s["id"] in releases.MATRIX or s.get("pair")] if pair else table
    globs = [g for o in only for g in o.split(",") if g]
    return [s for s in table if any(fnmatch.fnmatchcase(s["id"], g) for g in globs)]


def baseline_fingerprint():
    """What a trained baseline depends on: the DeepSpeed and torch releases, the worker scripts and
    layouts that trained it. Baselines kept under one fingerprint are reused from run to run."""
    import importlib.metadata as md

    h = hashlib.sha256(md.version("deepspeed").encode() + md.version("torch").encode())
    for path in sorted((CORPUS / "workers").glob("*.py")) + [CORPUS / "layouts.py"]:
        h.update(path.name.encode() + path.read_bytes())
    return h.hexdigest()[:12]


def _kept(name, base, own_log):
    """The metadata of layout `name` trained in `base` before, or None. `own_log`: only one whose log
    is its own launch's (a corpus case copies it), not a shared one of build_bases."""
    root, meta_path = base / name, base / f"{name}.json"
    if not (meta_path.exists() and root.exists()):
        return None
    meta = json.loads(meta_path.read_text())
    return None if own_log and meta.get("batched") else meta


def _train_args(name, base):
    lay = L.LAYOUTS[name]
    root = base / name
    shutil.rmtree(root, ignore_errors=True)
    args = L.worker_args(lay) + ["--save-dir", str(root / lay.get("sub", ""))]
    return args + (["--tag", L.TAG] if lay.get("sub") else [])


def batchable(lay):
    """A layout train_many.py can train beside others: plain train_save.py, no mpu, pipeline or kill."""
    return (L.script(lay, "train") == "train_save.py" and lay.get("launch") != "python"
            and not (lay.get("tp") or lay.get("pipe") or lay.get("kill_after_saves")))


def build_bases(names, base):
    """Train + save every layout of `names` not kept in `base` yet: those of one world size that
    train_save.py trains in one launch (corpus/workers/train_many.py; each rank's imports paid once,
    not once a layout), the others one launch each. For the tests' and the gate's baselines; a
    corpus case's baseline (whose log the case may copy) comes from build_base."""
    groups = {}
    for name in dict.fromkeys(names):
        if _kept(name, base, False):
            continue
        lay = L.LAYOUTS[name]
        if batchable(lay):
            groups.setdefault(L.nproc(lay), []).append(name)
        else:
            build_base(name, base, False)
    for nproc, group in groups.items():
        if len(group) == 1:
            build_base(group[0], base, False)
            continue
        group.sort(key=lambda name: L.LAYOUTS[name]["stage"] == 3)  # ZeRO-3's module hooks last
        stem = base / f"_batch-{nproc}-{'+'.join(group)}"[:200]
        plan, log = stem.with_suffix(".plan.json"), stem.with_suffix(".log")
        plan.write_text(json.dumps([_train_args(name, base) for name in group]))
        cmd = runner.torchrun(nproc, "train_many.py", ["--plan", str(plan)])
        t = time.time()
        rc = runner.run(cmd, {}, log)
        say(f"  bases {', '.join(group)} (one launch): exit {rc} in {time.time() - t:.0f}s")
        if rc != 0:
            raise SystemExit(f"baselines {', '.join(group)} failed (exit {rc}); see {log}")
        for name in group:
            meta = dict(command=runner.display(cmd, {}), exit_code=rc, log=str(log), batched=True)
            (base / f"{name}.json").write_text(json.dumps(meta))


def build_base(name, base, rebuild, own_log=False):
    """Train + save layout `name` once, in its own launch; returns its metadata (command, exit code,
    log path). `own_log`: a baseline kept from build_bases (a shared log) is trained again."""
    lay = L.LAYOUTS[name]
    meta_path = base / f"{name}.json"
    if not rebuild and (kept := _kept(name, base, own_log)):
        return kept
    args = _train_args(name, base)
    if lay.get("kill_after_saves"):
        args += ["--kill-after-saves", str(lay["kill_after_saves"])]
    cmd = runner.launch(lay, L.nproc(lay), L.script(lay, "train"), args)
    log = base / f"{name}.log"
    t = time.time()
    rc = runner.run(cmd, {}, log)
    say(f"  base {name}: exit {rc} in {time.time() - t:.0f}s")
    if rc != 0 and not lay.get("kill_after_saves"):
        raise SystemExit(f"baseline {name} failed (exit {rc}); see {log}")
    meta = dict(command=runner.display(cmd, {}), exit_code=rc, log=str(log))
    meta_path.write_text(json.dumps(meta))
    return meta


_WARMED = set()  # the build caches this process warmed up already: once is enough


def warm_up_ops(work):
    """Build DeepSpeed's CPU shm comm op into the private cache before any recorded run, so no
    recorded log contains a one-off compiler build."""
    if runner.EXT_DIR["path"] in _WARMED:
        return
    _WARMED.add(runner.EXT_DIR["path"])
    code = ("from deepspeed.comm.torch import build_shm_op; build_shm_op()")
    t = time.time()
    Path(runner.EXT_DIR["path"]).mkdir(parents=True, exist_ok=True)
    rc = runner.run([runner.PY, "-c", code], {}, work / "_torch_ext_build.log")
    say(f"  warm-up shm op build: exit {rc} in {time.time() - t:.0f}s")


def run_scenario(sc, work, base, out, keep):
    lay = L.LAYOUTS[sc["layout"]] if sc.get("layout") else {}
    kind = sc["kind"]
    log = out / log_rel(sc["id"], kind)
    log.parent.mkdir(parents=True, exist_ok=True)
    stale = log.parent.parent / ("cases" if kind == "clean" else "clean") / log.name
    stale.unlink(missing_ok=True)
    if sc.get("run") == "base":
        meta = build_base(sc["layout"], base, False, own_log=True)
        shutil.copyfile(meta["log"], log)
        rc, command = meta["exit_code"], meta["command"]
    else:
        root = work / sc["id"]
        if root.exists():
            shutil.rmtree(root)
        if sc.get("layout"):
            build_base(sc["layout"], base, False)
            shutil.copytree(base / sc["layout"], root, symlinks=True)
        else:
            root.mkdir(parents=True)
        ckpt = root / lay.get("sub", "")
        env = dict(sc.get("env", {}))
        if sc.get("user") == "nobody":
            env.update(runner.nobody_env(work))
            faults.make_world_readable(str(root))
        pre_logs, pre_cmds = [], []
        for n, pre in enumerate(sc.get("pre", [])):
            pre_cmd = runner.build_command(pre, lay, str(ckpt))
            pre_logs.append(root.parent / f"{sc['id']}.pre{n}.log")
            pre_cmds.append(runner.display(pre_cmd, {}))
            rc = runner.run(pre_cmd, {}, pre_logs[-1])
            if rc != 0:
                raise SystemExit(f"{sc['id']}: pre-step {pre} failed with {rc}")
        if sc.get("inject"):
            say(f"  fault: {faults.apply(str(ckpt), sc['inject'])}")
        cmd = runner.build_command(sc, lay, str(ckpt))
        rc = runner.run(cmd, env, log)
        if rc != 0 and kind == "clean":   # rare teardown crashes: keep the evidence, retry once
            failed = work / f"{sc['id']}.failed-attempt.log"
            shutil.copyfile(log, failed)
            say(f"  {sc['id']}: healthy run exited {rc}; log kept at {failed}, retrying")
            rc = runner.run(cmd, env, log)
        command = runner.display(cmd, {k: v for k, v in env.items() if k not in ("HOME", "TORCH_EXTENSIONS_DIR")})
        if sc.get("record_pre"):  # one job script ran them all: its log holds every step's output in order
            log.write_bytes(b"".join(p.read_bytes() for p in pre_logs) + log.read_bytes())
            command = "; ".join(pre_cmds + [command])
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    text = log.read_text(errors="replace")
    ok = (rc == 0) == (kind in ("clean", "silent")) or sc.get("any_exit")
    flag = "" if ok else f"   <-- kind {kind} but exit {rc}"
    say(f"{sc['id']}: exit {rc}{flag}")
    ds, tv = versions()
    entry = {
        "id": entry_id(sc["id"]),
        "log": str(log.relative_to(out)),
        "kind": kind,
        "scenario": sc["scenario"],
        "layout": L.describe(lay) if lay else None,
        "fault": sc.get("fault", "none (healthy run)"),
        "expected_category": sc.get("category", "unknown" if kind == "negative" else None),
        "expected_rule": sc["rule"] if "rule" in sc else expected_rule(entry_id(sc["id"])),
        "what_happened": logtools.what_happened(text, rc, sc.get("what")),
        "command": command,
        "exit_code": rc,
        "deepspeed": ds,
        "torch": tv,
    }
    if framework_versions(sc, lay):
        entry["frameworks"] = framework_versions(sc, lay)
    if sc.get("note"):
        entry["note"] = sc["note"]
    return entry


def framework_versions(sc, lay):
    """The installed release of each framework package the case ran through (the layout's or the
    scenario's `packages`)."""
    import importlib.metadata as md
    return {p: md.version(p) for p in sc.get("packages") or lay.get("packages") or []}


def expected_rule(case_id):
    """The hand-checked rule of the case's true cause (corpus/expected_rules.yaml), or None; a
    release pair's case `<id>@<pair>` has its own label, or else the scenario's."""
    labels = load_yaml((Path(__file__).parent / "expected_rules.yaml").read_text()) or {}
    return labels.get(case_id, labels.get(case_id.split("@")[0]))


def entry_id(scenario_id):
    return f"{scenario_id}@{PAIR['name']}" if PAIR["name"] else scenario_id


def log_rel(scenario_id, kind):
    """The log's path under the corpus dir: cases|clean/<id>.log, or releases/<pair>/cases|clean/<id>.log."""
    sub = f"{'clean' if kind == 'clean' else 'cases'}/{scenario_id}.log"
    return f"{releases.RELEASES_DIR}/{PAIR['name']}/{sub}" if PAIR["name"] else sub


def generated(out, sc) -> bool:
    """The scenario has a manifest entry (of this pair) whose log is on disk."""
    path = out / "manifest.yaml"
    entries = {e["id"]: e for e in (load_yaml(path.read_text()) or [])} if path.exists() else {}
    e = entries.get(entry_id(sc["id"]))
    return bool(e) and (out / e["log"]).exists()


def table():
    """The scenarios as run: on a release pair, with what that pair showed (releases.OBSERVED)."""
    return [releases.observed(PAIR["name"], s) for s in SCENARIOS] if PAIR["name"] else SCENARIOS


def write_manifest(out, new_entries, drop=()):
    """Merge entries into the manifest under a lock: two generations (two release pairs) at once
    each rewrite it after every scenario, and lost each other's entries without it."""
    import fcntl
    with open(out / ".manifest.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _write_manifest(out, new_entries, drop)


def _write_manifest(out, new_entries, drop):
    path = out / "manifest.yaml"
    old = {e["id"]: e for e in (load_yaml(path.read_text()) or [])} if path.exists() else {}
    old.update({e["id"]: e for e in new_entries})
    for case_id in drop:
        old.pop(case_id, None)
    keys = ["id", "log", "kind", "scenario", "layout", "fault", "expected_category", "expected_rule", "what_happened", "command",
            "exit_code", "deepspeed", "torch", "frameworks", "note"]
    pairs = sorted({i.split("@")[1] for i in old if "@" in i}, key=releases.pair_order)
    ids = [s["id"] for s in SCENARIOS] + [f"{s['id']}@{p}" for p in pairs for s in SCENARIOS]
    ordered = [{k: old[i][k] for k in keys if k in old[i]} for i in ids if i in old]
    header = ("# Generated by `python -m corpus.generate` from corpus/scenarios.py - do not edit by hand.\n"
              "# Every log is the untouched combined stdout+stderr of a real run on CPU.\n")
    path.write_text(header + yaml.safe_dump(ordered, sort_keys=False, width=120, allow_unicode=True))


def reindex(out, chosen):
    """Refresh table-derived fields and what_happened of existing entries; logs stay untouched."""
    path = out / "manifest.yaml"
    old = {e["id"]: e for e in load_yaml(path.read_text())}
    entries, gone = [], []
    for sc in chosen:
        e = old.get(entry_id(sc["id"]))
        if e and not (out / e["log"]).exists():   # a run that was stopped before it rewrote its log
            gone.append(e["id"])
            continue
        if not e and sc.get("captured") and (out / sc["captured"]["log"]).exists():
            e = dict(id=entry_id(sc["id"]), log=sc["captured"]["log"], command=sc["captured"]["command"],
                     exit_code=sc["captured"]["exit_code"], deepspeed=versions()[0], torch=versions()[1])
        if not e:
            continue
        lay = L.LAYOUTS[sc["layout"]] if sc.get("layout") else None
        src = out / e["log"]
        e["log"] = log_rel(sc["id"], sc["kind"])
        if out / e["log"] != src:
            src.rename(out / e["log"])
        e.update(kind=sc["kind"], scenario=sc["scenario"], layout=L.describe(lay) if lay else None,
                 fault=sc.get("fault", "none (healthy run)"),
                 expected_category=sc.get("category", "unknown" if sc["kind"] == "negative" else None),
                 expected_rule=sc["rule"] if "rule" in sc else expected_rule(entry_id(sc["id"])),
                 what_happened=logtools.what_happened((out / e["log"]).read_text(errors="replace"),
                                                      e["exit_code"], sc.get("what")))
        e.pop("note", None)
        if sc.get("note"):
            e["note"] = sc["note"]
        entries.append(e)
    write_manifest(out, entries, gone)
    say(f"reindexed {len(entries)} entries" + (f"; dropped {len(gone)} whose log is gone" if gone else ""))


def main():
    args = parse()
    QUIET["on"] = args.quiet
    progress.configure(args.progress, args.quiet)
    if args.deepspeed:
        PAIR["name"] = releases.pair_name(args.deepspeed, args.torch)
    chosen = [s for s in table() if s["id"] in {c["id"] for c in select(args.only, PAIR["name"])}]
    if args.missing:
        chosen = [s for s in chosen if not generated(args.out, s)]
        if not chosen and not args.list:
            return say("every chosen scenario is generated already")
    if args.list:
        for s in chosen:
            print(f"{s['id']:60s} {s['kind']:9s} {s.get('category') or ''}")
        return
    if not chosen:
        raise SystemExit(f"no scenario matches {args.only}")
    if PAIR["name"]:
        runner.use_venv(releases.ensure_venv(args.deepspeed, args.torch, say))
    if args.reindex:
        return reindex(args.out, chosen)
    work = (args.keep or DEFAULT_WORK).resolve() / (PAIR["name"] or "")
    base = work / "_base"
    base.mkdir(parents=True, exist_ok=True)
    work.chmod(0o755)
    runner.EXT_DIR["path"] = str(ext_cache())
    warm_up_ops(work)
    if args.rebuild:
        for name in {s["layout"] for s in chosen if s.get("layout")}:
            build_base(name, base, True)
    t0, entries = time.time(), []
    errors = []
    with progress.meter("corpus: scenarios", len(chosen), unit="scenarios") as shown:
        for number, sc in enumerate(chosen, 1):
            say(f"[{number}/{len(chosen)}, {time.time() - t0:.0f}s] {sc['id']}")  # running counts
            if sc.get("captured"):   # a one-off real log kept as recorded; refreshed, never re-run
                reindex(args.out, [sc])
            else:
                try:
                    entries.append(run_scenario(sc, work, base, args.out, args.keep is not None))
                    write_manifest(args.out, entries)
                except (Exception, SystemExit) as e:   # a broken setup step must not stop the other scenarios
                    errors.append(f"{sc['id']}: {e}")
                    print(f"{sc['id']}: NOT GENERATED: {e}", file=sys.stderr)
            shown.set_postfix_str(f"{len(entries)} generated, {len(errors)} not", refresh=False)
            shown.update()
    print(f"{len(entries)} scenario(s) in {time.time() - t0:.0f}s -> {args.out}", file=sys.stderr)
    if errors:
        raise SystemExit("not generated:\n  " + "\n  ".join(errors))


if __name__ == "__main__":
    main()
