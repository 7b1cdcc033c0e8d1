"""The verdict on pasted evidence is the verdict with the checkpoint in hand: real faulted checkpoints
(tests/probe_checkpoints.py scenarios, the corpus's own faults), their real `id` (as the job's user,
nobody), `cat latest` and `ls -la` captured at test time, decided by `triage --evidence`, against
`triage --ckpt ... --as-user nobody` on the same checkpoint and the same corpus log."""

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.probe_checkpoints import scenario

CASES = ["zero2-dp2-optim-shard-truncated", "zero2-dp2-optim-shard-unreadable", "zero2-dp2-optim-shard-deleted",
         "zero3-dp2-latest-deleted", "zero3-dp2-tag-dir-unreadable", "zero3-saved-stage2-load-dp2"]

# A listing cannot show the saved dp when the last rank's file is gone (the real probe reads it from
# the metadata): optim-shard-deleted stays `likely` on evidence, the others are confirmed as in hand.
CONFIRMED = ["zero2-dp2-optim-shard-truncated", "zero2-dp2-optim-shard-unreadable", "zero3-dp2-tag-dir-unreadable",
             "zero3-saved-stage2-load-dp2"]


def capture(root) -> str:
    tags = " ".join(f"{root}/{p.name}" for p in sorted(root.iterdir()) if p.is_dir())
    command = (f"setpriv --reuid=65534 --regid=65534 --clear-groups id; cat {root}/latest 2>/dev/null && echo; "
               f"ls -la {root} {tags}")
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True).stdout


def verdict(*args) -> dict:
    done = subprocess.run([sys.executable, "-m", "triage", "triage", *args, "--json"], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.stdout, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("case", CASES)
def test_evidence_decides_as_the_checkpoint_in_hand(case, tmp_path):
    root = scenario(case)
    log = str(ROOT / "corpus" / "cases" / f"{case}.log")
    (tmp_path / "pasted.txt").write_text(capture(root))
    real = verdict("--log", log, "--ckpt", str(root), "--as-user", "nobody")
    pasted = verdict("--log", log, "--evidence", str(tmp_path / "pasted.txt"))
    if case in CONFIRMED:  # what the names, sizes and modes alone can confirm
        assert pasted["verdict"]["status"] == real["verdict"]["status"] == "confirmed", (pasted["verdict"], real["verdict"])
    assert (pasted["verdict"]["category"], pasted["verdict"]["rule_id"]) == \
        (real["verdict"]["category"], real["verdict"]["rule_id"]), (pasted["verdict"], real["verdict"])
    for mine, theirs in (("refuted", "confirmed"), ("confirmed", "refuted")):  # never the opposite of the probe
        pasted_ids = {h["rule_id"] for h in pasted["hypotheses"] if h["status"] == mine}
        assert not pasted_ids & {h["rule_id"] for h in real["hypotheses"] if h["status"] == theirs}
