#!/usr/bin/env python3
"""Speed of `ds-triage probe` on 64 ZeRO shards of ~1 MB and of ~1 GB each (issue 4).

    DS_ACCELERATOR=cpu .venv/bin/python benchmarks/bench_probe.py [--runs 11] [--work DIR] [--gb-distinct 4]
                                                                  [--deep-runs 3]

Goal (issue 4): probing a checkpoint of 64 shards takes well under a second, and the same
whether the shards are 1 MB or 1 GB each; reading all of a shard is for `--deep` only.

Prints, measured in the same run: the median wall time of `python3 -c pass` and of
`ds-triage probe CKPT --json` (a new process each run: "cold" start of the interpreter and the
imports; the OS page cache is NOT dropped, which needs root and disturbs the machine), the
warm in-process call (`probe_all(ProbeContext.for_path(CKPT))`), and per child process its peak
RSS (wait4 rusage ru_maxrss) and bytes read from /proc/<pid>/io (`rchar`: every byte returned by
read(2), page cache or not, including the interpreter's own .py/.pyc reads; `read_bytes`:
bytes fetched from the block device, ~0 when the page cache is warm). `--deep` (CRC-32 of every
record, reads every byte) is timed on the 1 MB checkpoint only; it exits 1 there since issue 19:
the tiled partitions do not add up to the model, which --deep's consistency probe reports.

`--deep` with the consistency probe (issue 19: each rank's fp32 master partition compared with its
slice of the module weights, in one streaming pass that also checks every CRC) is timed on two
64-rank checkpoints whose shards agree (benchmarks/deep_checkpoint.py): ~1 MB and ~64 MB shards
(22 MB and 1.4 GB of module weights). For each: the bytes in the tag, rchar over them (1.0x plus
the interpreter's own reads = every byte read once), peak RSS (the same for both sizes = memory
independent of shard size), and the consistency probe's status (refuted = nothing wrong found).

How the two 64-rank checkpoints are made (once, cached under --work, default
/tmp/ds-triage-bench-probe; delete it to rebuild):

* Source: the real ZeRO-2, dp 2, fp32 checkpoint that corpus/generate.py trains and saves with
  real DeepSpeed (CPU, gloo, torchrun, DS_ACCELERATOR=cpu): <corpus>/_base/z2-dp2-fp32/global_step3
  (built with `python -m corpus.generate --only 'z2-dp2-fp32*' --keep /tmp/ds-triage-corpus` if missing).
* Model file: mp_rank_00_model_states.pt is torch.load-ed and torch.save-d with dp_world_size set
  to 64; everything else (module weights, param_shapes, ds_config, ds_version, ...) as saved.
* Optimizer shards zero_pp_rank_{0..63}_mp_rank_00_optim_states.pt: rank r is the real rank
  (r % 2) shard's dict, torch.save-d again (same pickle globals: DeepSpeed's LossScaler,
  ZeroStageEnum, fragment_address, ...), with partition_count set to [64] and its three flat fp32
  tensors (single_partition_of_fp32_groups[0], base_optimizer_state exp_avg and exp_avg_sq)
  replaced by N-element fp32 tensors holding the real partition's values tiled (3 x 4 x N bytes:
  N = 87,381 for ~1 MiB, N = 89,478,485 for ~1 GiB per shard). param_slice_mappings and the model's
  param_shapes still describe the real 67,080-parameter model: the degrees, file set and saved
  metadata are a consistent 64-rank layout, but partition sizes do not add up to the model
  (the probe does not cross-check them; DeepSpeed's own load would not accept the shards).
* Disk: 64 x 1 GiB does not fit beside everything else in /tmp, so the 1 GB checkpoint holds
  --gb-distinct (default 4) real 1 GiB files written as above (ranks 0..k-1) and the other ranks
  are hard links to them (rank r -> rank r % k): 64 distinct names of 1 GiB each as the probe sees
  them (stat size, open, read), k GiB on disk. The benchmark checks this does not change the
  result: a 1 MB checkpoint built the same way with hard links gives the same probe JSON as the
  all-distinct 1 MB one, and the 1 GB one the same as the 1 MB one (paths aside).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DP = 64
TAG = "global_step3"
SOURCE = Path("/tmp/ds-triage-corpus/_base/z2-dp2-fp32")
VARIANTS = {"1mb": 87_381, "1mb-linked": 87_381, "1gb": 89_478_485}
DEEP_VARIANTS = {"deep-1mb": 87_382, "deep-64mb": 5_592_406}  # consistent 64-rank checkpoints (even N)
STAMP_VERSION = 1


def build(root: Path, source: Path, numel: int, distinct: int) -> None:
    """One 64-rank ZeRO-2 checkpoint at root (see the module docstring)."""
    import torch

    src = source / TAG
    tmp = root.with_name(root.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / TAG).mkdir(parents=True)
    (tmp / "latest").write_text(TAG)
    model = torch.load(src / "mp_rank_00_model_states.pt", map_location="cpu", weights_only=False)
    model["dp_world_size"] = DP
    torch.save(model, tmp / TAG / "mp_rank_00_model_states.pt")
    real = [torch.load(src / f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt", map_location="cpu", weights_only=False)
            for r in range(2)]
    for rank in range(DP):
        name = tmp / TAG / f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt"
        if rank >= distinct:
            os.link(tmp / TAG / f"zero_pp_rank_{rank % distinct}_mp_rank_00_optim_states.pt", name)
            continue
        sd = real[rank % 2]
        osd = sd["optimizer_state_dict"]
        saved = (osd["single_partition_of_fp32_groups"], osd["base_optimizer_state"]["state"], osd["partition_count"])
        state = {k: dict(v) for k, v in osd["base_optimizer_state"]["state"].items()}
        for s in state.values():
            for key in ("exp_avg", "exp_avg_sq"):
                s[key] = tiled(s[key], numel, rank)
        osd["single_partition_of_fp32_groups"] = [tiled(t, numel, rank) for t in saved[0]]
        osd["base_optimizer_state"]["state"] = state
        osd["partition_count"] = [DP for _ in saved[2]]
        torch.save(sd, name)
        osd["single_partition_of_fp32_groups"], osd["base_optimizer_state"]["state"], osd["partition_count"] = saved
        del state
    shutil.rmtree(root, ignore_errors=True)
    tmp.rename(root)


def tiled(t, numel: int, shift: int):
    """An N-element copy of the real flat partition's values, repeated (own storage: torch.save
    writes a view's whole storage)."""
    flat = t.reshape(-1)
    reps = -(-(numel + shift) // flat.numel())
    return flat.repeat(reps)[shift:shift + numel].clone()


def ensure(work: Path, source: Path, gb_distinct: int) -> dict[str, Path]:
    out = {}
    for name, numel in VARIANTS.items():
        distinct = DP if name == "1mb" else gb_distinct
        root = work / name
        stamp = {"v": STAMP_VERSION, "source": str(source), "numel": numel, "distinct": distinct, "dp": DP}
        stamp_file = work / f"{name}.json"
        if not (root.is_dir() and stamp_file.exists() and json.loads(stamp_file.read_text()) == stamp):
            t = time.time()
            print(f"building {root} ({DP} shards, {distinct} distinct files, {numel:,} fp32 x 3 each) ...",
                  file=sys.stderr, flush=True)
            build(root, source, numel, distinct)
            stamp_file.write_text(json.dumps(stamp))
            print(f"  built in {time.time() - t:.0f}s", file=sys.stderr, flush=True)
        out[name] = root
    for name, numel in DEEP_VARIANTS.items():
        from benchmarks import deep_checkpoint

        root, stamp_file = work / name, work / f"{name}.json"
        stamp = {"v": STAMP_VERSION, "source": str(source), "numel": numel, "dp": DP, "consistent": True}
        if not (root.is_dir() and stamp_file.exists() and json.loads(stamp_file.read_text()) == stamp):
            t = time.time()
            print(f"building {root} ({DP} consistent shards, {numel:,} fp32 x 3 each) ...", file=sys.stderr, flush=True)
            deep_checkpoint.build(root, source, numel)
            stamp_file.write_text(json.dumps(stamp))
            print(f"  built in {time.time() - t:.0f}s", file=sys.stderr, flush=True)
        out[name] = root
    return out


def run_child(cmd: list[str], env: dict) -> dict:
    """Wall time, exit code, peak RSS and /proc/<pid>/io of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout.read()
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)   # exited, not reaped: /proc/<pid>/io still there
    wall = time.perf_counter() - start
    io = {}
    try:
        for line in Path(f"/proc/{proc.pid}/io").read_text().splitlines():
            key, value = line.split(":")
            io[key] = int(value)
    except OSError:
        pass
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"wall": wall, "rc": proc.returncode, "rss_kib": usage.ru_maxrss, "rchar": io.get("rchar"),
            "read_bytes": io.get("read_bytes"), "stdout": out}


def sample(cmd: list[str], env: dict, runs: int) -> dict:
    rows = [run_child(cmd, env) for _ in range(runs)]
    pick = lambda k: statistics.median(r[k] for r in rows if r[k] is not None) if any(r[k] is not None for r in rows) else None
    return {"wall": pick("wall"), "rss_kib": max(r["rss_kib"] for r in rows), "rchar": pick("rchar"),
            "read_bytes": pick("read_bytes"), "rc": sorted({r["rc"] for r in rows}), "stdout": rows[-1]["stdout"]}


def warm(path: Path, runs: int, deep: bool = False) -> tuple[float, int]:
    """Median time of the in-process probe, and the peak Python allocation of one call (tracemalloc)."""
    import tracemalloc

    from triage.probe.context import ProbeContext
    from triage.probe.report import probe_all

    probe_all(ProbeContext.for_path(str(path), deep=deep))
    tracemalloc.start()
    probe_all(ProbeContext.for_path(str(path), deep=deep)).to_json()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        probe_all(ProbeContext.for_path(str(path), deep=deep)).to_json()
        times.append(time.perf_counter() - start)
    return statistics.median(times), peak


def normalized(stdout: bytes, root: Path) -> dict:
    text = stdout.decode().replace(str(root), "<CKPT>")
    return json.loads(text)


def disk(root: Path) -> tuple[int, int, int]:
    """(number of optimizer shards, apparent bytes of the tag dir, bytes on disk counting each inode once)."""
    seen, apparent, real, shards = set(), 0, 0, 0
    for p in (root / TAG).iterdir():
        st = p.stat()
        apparent += st.st_size
        shards += "optim_states" in p.name
        if st.st_ino not in seen:
            seen.add(st.st_ino)
            real += st.st_size
    return shards, apparent, real


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11, help="cold runs per command (median)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/ds-triage-bench-probe"),
                        help="where the 64-shard checkpoints are built once and cached")
    parser.add_argument("--source", type=Path, default=SOURCE, help="the real dp-2 ZeRO-2 checkpoint to derive from")
    parser.add_argument("--gb-distinct", type=int, default=4, help="distinct 1 GiB files (the rest are hard links)")
    parser.add_argument("--deep-runs", type=int, default=3, help="cold runs of probe --deep on the consistent checkpoints")
    parser.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not (args.source / TAG / "zero_pp_rank_1_mp_rank_00_optim_states.pt").exists():
        raise SystemExit(f"{args.source}: no real ZeRO-2 dp-2 checkpoint; build it with "
                         "python -m corpus.generate --only 'z2-dp2-fp32*' --keep /tmp/ds-triage-corpus")
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    args.work.mkdir(parents=True, exist_ok=True)
    distinct = max(1, min(DP, args.gb_distinct))
    if args.build_only:
        ensure(args.work, args.source, distinct)
        return 0
    # Built in a child so that this process never holds torch or the big tensors: a child's
    # ru_maxrss starts at the high-water mark of the process that forked it.
    subprocess.run([sys.executable, __file__, "--build-only", "--work", str(args.work), "--source", str(args.source),
                    "--gb-distinct", str(distinct)], check=True)
    ckpts = {name: args.work / name for name in VARIANTS}
    env = dict(os.environ)
    exe = shutil.which("ds-triage", path=str(Path(sys.executable).parent)) or shutil.which("ds-triage")
    cli = [exe] if exe else [sys.executable, "-m", "triage"]

    run_child(cli + ["probe", str(ckpts["1mb"]), "--json"], env)   # first run: fills any cache, as any first run does
    cases = (("1mb", False), ("1gb", False), ("1mb", True), ("1mb-linked", False))
    base = sample(["python3", "-c", "pass"], env, args.runs)
    cold = {}
    for name, deep in cases:   # all cold runs first, while this process is still small
        cold[(name, deep)] = sample(cli + ["probe", str(ckpts[name]), "--json"] + (["--deep"] if deep else []), env, args.runs)
    floor = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rows = [("python3 -c pass", base, None, None)]
    results = {}
    for name, deep in cases:
        label = f"probe {name}" + (" --deep" if deep else "")
        results[label] = normalized(cold[(name, deep)]["stdout"], ckpts[name])
        rows.append((label, cold[(name, deep)], *warm(ckpts[name], max(5, args.runs * 2), deep)))

    same_links = results["probe 1mb"] == results["probe 1mb-linked"]
    same_size = results["probe 1mb"] == results["probe 1gb"]
    b = base["wall"]
    print(f"command: {' '.join([Path(sys.executable).name] + sys.argv)}")
    print(f"probe command: {' '.join([Path(cli[0]).name] + cli[1:])} probe CKPT --json [--deep]  (new process each run, "
          f"median of {args.runs}; page cache warm)")
    for name in ("1mb", "1gb"):
        n, apparent, real = disk(ckpts[name])
        print(f"  {name}: {ckpts[name]}: {n} optimizer shards + 1 model file, {apparent / 2**20:,.0f} MiB as listed, "
              f"{real / 2**20:,.0f} MiB on disk" + (f" ({args.gb_distinct} distinct 1 GiB files, the rest hard links)"
                                                    if real < apparent else ""))
    print(f"{'':20s} {'cold median':>12s} {'vs python':>9s} {'peak RSS':>10s} {'rchar':>12s} {'read_bytes':>11s} "
          f"{'exit':>4s} {'warm median':>12s} {'warm alloc':>11s}")
    for label, s, w, alloc in rows:
        ratio = f"{s['wall'] / b:.1f}x" if label != "python3 -c pass" else ""
        warm_txt = f"{w * 1000:9.1f} ms" if w is not None else ""
        alloc_txt = f"{alloc / 2**20:7.2f} MiB" if alloc is not None else ""
        rchar = f"{s['rchar'] / 2**20:8.2f} MiB" if s["rchar"] is not None else "n/a"
        rb = f"{s['read_bytes'] / 2**20:8.2f} MiB" if s["read_bytes"] is not None else "n/a"
        print(f"{label:20s} {s['wall'] * 1000:9.1f} ms {ratio:>9s} {s['rss_kib'] / 1024:6.1f} MiB {rchar:>12s} {rb:>11s} "
              f"{','.join(map(str, s['rc'])):>4s} {warm_txt:>12s} {alloc_txt:>11s}")
    print(f"peak RSS: wait4 ru_maxrss of the child, max over runs (it cannot be below this launcher's own "
          f"{floor / 1024:.1f} MiB at fork); warm alloc: tracemalloc peak of one in-process probe call")
    print(f"probe JSON, hard-linked vs distinct 1 MB shards: {'identical' if same_links else 'DIFFERENT'}; "
          f"1 GB vs 1 MB shards: {'identical' if same_size else 'DIFFERENT'} (paths aside)")
    print("goal (issue 4): 64 shards well under a second, the same for 1 MB and 1 GB shards; --deep reads every byte")
    deep_ok = deep_rows(cli, env, args)
    return 0 if same_links and same_size and deep_ok else 1


def deep_rows(cli: list[str], env: dict, args) -> bool:
    """probe --deep on the consistent 64-rank checkpoints: time, peak RSS, bytes read against bytes held."""
    print(f"\nprobe --deep, consistency probe included (new process each run, median of {args.deep_runs}; "
          "page cache warm):")
    print(f"{'':20s} {'tag bytes':>11s} {'cold median':>12s} {'peak RSS':>10s} {'rchar':>11s} {'rchar/bytes':>11s} "
          f"{'read_bytes':>11s} {'exit':>4s}  consistency")
    ok = True
    for name in DEEP_VARIANTS:
        root = args.work / name
        s = sample(cli + ["probe", str(root), "--deep", "--json"], env, args.deep_runs)
        _, apparent, _ = disk(root)
        probes = {p["name"]: p for p in json.loads(s["stdout"])["probes"]}
        status = probes.get("consistency", {}).get("status", "missing")
        ok &= s["rc"] == [0] and status == "refuted"
        rchar = s["rchar"] or 0
        print(f"probe {name:14s} {apparent / 2**20:7,.0f} MiB {s['wall']:10.2f} s {s['rss_kib'] / 1024:6.1f} MiB "
              f"{rchar / 2**20:7,.0f} MiB {rchar / apparent:10.2f}x {(s['read_bytes'] or 0) / 2**20:7,.0f} MiB "
              f"{','.join(map(str, s['rc'])):>4s}  {status}")
    print("goal (issue 19): --deep reads every byte once (rchar/bytes ~1.0, plus the interpreter's own reads), "
          "streaming, with peak memory independent of shard size")
    return ok


if __name__ == "__main__":
    sys.exit(main())
