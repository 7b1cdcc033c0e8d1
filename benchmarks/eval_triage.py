"""How often `ds-triage triage` (log + checkpoint, no other option) gives the expected category.

Two scores: the confirmed verdict (`verdict.status: confirmed`, a cause the probes confirmed),
and the verdict's answer whatever its status (confirmed, or likely: the first hypothesis the
probes did not strike off).

    python -m corpus.generate --keep /tmp/ds-triage-corpus     # the corpus's checkpoints (~26 min)
    .venv/bin/python benchmarks/eval_triage.py --ckpts /tmp/ds-triage-corpus [--healthy]

Each failure and silent case of corpus/manifest.yaml is triaged with its real log against its
kept checkpoint (the one its command loaded). Prints the score and every miss with the verdict
it got. Cases whose load ran as another user (setpriv) are triaged with --as-user for that user,
as an on-call root would; run as anyone else, those are triaged as you. --healthy also triages
every clean case (a load that worked) on its kept checkpoint: none may be flagged.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from triage.eval.checkpoints import _verify_fails, as_user, checkpoint_of  # noqa: E402  (shared with eval --with-checkpoints)

TRIAGE = [sys.executable, "-m", "triage", "triage"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpts", type=Path, default=Path("/tmp/ds-triage-corpus"))
    parser.add_argument("--healthy", action="store_true",
                        help="also triage every clean case (a load that worked) with its log and kept checkpoint: "
                        "none may be flagged (a finding or a confirmed verdict)")
    args = parser.parse_args(argv)
    manifest = yaml.safe_load((ROOT / "corpus" / "manifest.yaml").read_text())
    cases = [c for c in manifest if c["kind"] in ("failure", "silent")]
    right, standing, tried, misses, silent = 0, 0, 0, [], []
    for case in cases:
        # a silent fault is triaged with --deep, and `verify --deep --load-dir` of the dir its job
        # loaded must fail, as the gate asks of its subset
        deep = case["kind"] == "silent"
        data = _triage(case, args.ckpts, extra=["--deep"] if deep else [])
        if data is None:
            continue
        if deep:
            ckpt, loaded = checkpoint_of(case, args.ckpts), checkpoint_of(case, args.ckpts, loaded=True)
            found = (data.get("verdict") or {}).get("status") == "confirmed" and \
                data["verdict"]["category"] == case["expected_category"]
            silent.append((case["id"], found, _verify_fails(ckpt, loaded or ckpt)))
        verdict = data.get("verdict") or {"status": "error", "category": f"error {data.get('exit')}"}
        # the verdict's answer (confirmed or likely), and the confirmed one alone
        answer = verdict["category"]
        confirmed = answer if verdict.get("status") == "confirmed" else "unknown"
        tried += 1
        right += confirmed == case["expected_category"]
        standing += answer == case["expected_category"]
        if confirmed != case["expected_category"]:
            misses.append((case["id"], case["expected_category"], confirmed, verdict.get("rule_id"),
                           f"{answer} ({verdict.get('status')})"))
    print(f"$ {' '.join(sys.argv)}")
    print(f"{tried} cases with a kept checkpoint ({len(cases) - tried} without one); running as uid {os.getuid()}")
    print(f"  confirmed verdict = expected category: {right}/{tried}")
    print(f"  verdict's answer (confirmed or likely) = expected category: {standing}/{tried}")
    for miss in misses:
        print("  miss: {} expected {}, confirmed {} {}; answer: {}".format(*miss))
    print(f"  silent faults (triage --deep): found {sum(f for _, f, _ in silent)}/{len(silent)}, "
          f"verify --deep --load-dir failed {sum(v for _, _, v in silent)}/{len(silent)}")
    for case_id, found, failed in silent:
        if not (found and failed):
            print(f"  silent miss: {case_id}: found {found}, verify failed {failed}")
    if args.healthy:
        clean = [(c, _triage(c, args.ckpts, loaded=True)) for c in manifest if c["kind"] == "clean"]
        kept = [(c, d) for c, d in clean if d is not None]
        flagged = [(c["id"], d.get("findings"), (d.get("verdict") or {}).get("status", "error")) for c, d in kept
                   if d.get("findings") or (d.get("verdict") or {}).get("status", "error") in ("confirmed", "error")]
        print(f"  healthy (clean) cases flagged: {len(flagged)}/{len(kept)} ({len(clean) - len(kept)} without a kept "
              "checkpoint)")
        for case_id, findings, status in flagged:
            print(f"  flagged: {case_id}: findings {findings}, verdict {status}")
    return 0


def _triage(case: dict, ckpts: Path, loaded: bool = False, extra=()) -> dict | None:
    """`ds-triage triage --json` of the case's log on its kept checkpoint (loaded: the dir its load
    was given, as a healthy job's on-call would pass it); None without one."""
    ckpt = checkpoint_of(case, ckpts, loaded)
    if ckpt is None:
        return None
    out = subprocess.run(TRIAGE + ["--log", str(ROOT / "corpus" / case["log"]), "--ckpt", str(ckpt), "--json"]
                         + as_user(case) + list(extra), capture_output=True, text=True, cwd=ROOT)
    return json.loads(out.stdout) if out.stdout.strip() else {"exit": out.returncode}


if __name__ == "__main__":
    sys.exit(main())
