"""How often `ds-triage triage` (log + checkpoint, no other option) gives the expected category.

Two scores: the verdict (a cause the probes confirmed), and the report's answer: the verdict,
else the first hypothesis the probes did not strike off (standing without a probe able to decide
it), which is what a reader of the report takes as the answer.

    python -m corpus.generate --keep /tmp/ds-triage-corpus     # the corpus's checkpoints (~26 min)
    .venv/bin/python benchmarks/eval_triage.py --ckpts /tmp/ds-triage-corpus

Each failure and silent case of corpus/manifest.yaml is triaged with its real log against its
kept checkpoint (the one its command loaded). Prints the score and every miss with the verdict
it got. Cases whose load ran as another user (setpriv) are triaged with --as-user for that user,
as an on-call root would; run as anyone else, those are triaged as you.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
TRIAGE = [sys.executable, "-m", "triage", "triage"]


def checkpoint_of(case: dict, ckpts: Path) -> Path | None:
    """The checkpoint the case's command loaded (converters name theirs), else its kept dir."""
    m = re.search(r"--input_folder\s+(\S+)|zero_to_fp32\.py\s+(\S+)", case.get("command", ""))
    named = next((g for g in (m.groups() if m else ()) if g), None)
    for path in (Path(named) if named else None, ckpts / case["id"]):
        if path is not None and path.exists():
            return path
    return None


def as_user(case: dict) -> list[str]:
    """The user the case's load ran as (setpriv --reuid), as an on-call root would pass it."""
    m = re.match(r"setpriv --reuid=(\d+)(?: --regid=(\d+))?", case.get("command", ""))
    if not m or os.geteuid() != 0:
        return []
    return ["--as-user", m.group(1) + (f":{m.group(2)}" if m.group(2) else "")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpts", type=Path, default=Path("/tmp/ds-triage-corpus"))
    args = parser.parse_args(argv)
    cases = [c for c in yaml.safe_load((ROOT / "corpus" / "manifest.yaml").read_text())
             if c["kind"] in ("failure", "silent")]
    right, standing, tried, misses = 0, 0, 0, []
    for case in cases:
        ckpt = checkpoint_of(case, args.ckpts)
        if ckpt is None:
            continue
        out = subprocess.run(TRIAGE + ["--log", str(ROOT / "corpus" / case["log"]), "--ckpt", str(ckpt), "--json"]
                             + as_user(case), capture_output=True, text=True, cwd=ROOT)
        data = json.loads(out.stdout) if out.stdout.strip() else {}
        verdict = data.get("verdict") or {"category": f"error {out.returncode}"}
        # what the report puts first: the verdict, else the first cause the probes did not strike off
        top = next((h for h in data.get("hypotheses", []) if h.get("status") != "refuted"), None)
        top_category = verdict["category"] if verdict["category"] != "unknown" else (top["category"] if top else "unknown")
        tried += 1
        right += verdict["category"] == case["expected_category"]
        standing += top_category == case["expected_category"]
        if verdict["category"] != case["expected_category"]:
            misses.append((case["id"], case["expected_category"], verdict["category"], verdict.get("rule_id"),
                           top_category))
    print(f"$ {' '.join(sys.argv)}")
    print(f"{tried} cases with a kept checkpoint ({len(cases) - tried} without one); running as uid {os.getuid()}")
    print(f"  confirmed verdict = expected category: {right}/{tried}")
    print(f"  report's answer (verdict, else first cause not struck off) = expected category: {standing}/{tried}")
    for miss in misses:
        print("  miss: {} expected {}, verdict {} {}; first standing: {}".format(*miss))
    return 0


if __name__ == "__main__":
    sys.exit(main())
