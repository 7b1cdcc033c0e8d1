"""triage: a confirmed cause ranks above an unconfirmed one, and a rule whose premise the probes
refuted is refuted (issue 44, item 1). Real corpus logs on real baselines (tests/probe_checkpoints.py).

The ZeRO-3 rules' premise is data in the rule (`premise: saved: {stage_family: [...]}`,
rules/schema.json), checked against the layout the probes read (verdict.premise_refuted): DS-Z001,
a ZeRO-3 save loaded below stage 3, cannot be the cause on a checkpoint saved with ZeRO-2, however
the log reads.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests import probe_checkpoints as pc

CASES = pc.ROOT / "corpus/cases"
JOB = CASES / "job-zero3-train-then-stage2-load.log"  # trains ZeRO-3, then loads at stage 2: DS-Z001 tops
LOAD_ONLY = (349, 439)  # its load's own output, as a user pastes it: no line says the load's stage


def _triage(log, ckpt, *extra) -> dict:
    ran = subprocess.run([sys.executable, "-m", "triage", "triage", "--log", str(log), "--ckpt", str(ckpt),
                          "--format", "json", *extra], capture_output=True, text=True, cwd=pc.ROOT, timeout=300)
    assert ran.returncode in (0, 1), ran.stderr
    return json.loads(ran.stdout)


def _statuses(report) -> list[tuple[str, str, float]]:
    return [(h["rule_id"], h["status"], h["confidence"]) for h in report["hypotheses"]]


def test_a_confirmed_cause_ranks_above_a_likelier_unconfirmed_one():
    """DS-Z001 (0.60) confirmed on the ZeRO-3 checkpoint ranks above DS-F001 (0.70), open, in the
    JSON, the text and the verdict."""
    ckpt = pc.layout_base("z3-dp2-fp32")
    log = CASES / "zero3-saved-stage2-load-dp2.log"
    report = _triage(log, ckpt)
    ranked = _statuses(report)
    assert ranked[0][:2] == ("DS-Z001", "confirmed"), ranked
    confidence = {rule: c for rule, _, c in ranked}
    assert confidence["DS-F001"] > confidence["DS-Z001"]  # the log alone ranks DS-F001 first
    order = {"confirmed": 0, "inconclusive": 1, "refuted": 2}
    assert [order[s] for _, s, _ in ranked] == sorted(order[s] for _, s, _ in ranked)
    assert report["verdict"]["rule_id"] == "DS-Z001" and report["verdict"]["status"] == "confirmed"
    text = subprocess.run([sys.executable, "-m", "triage", "triage", "--log", str(log), "--ckpt", str(ckpt)],
                          capture_output=True, text=True, cwd=pc.ROOT, timeout=300).stdout
    listed = [line.split()[3] for line in text.splitlines() if line[:3] in ("1. ", "2. ", "3. ")]
    assert listed[:2] == ["DS-Z001", "DS-F001"], text


def test_a_zero3_rule_on_a_zero2_checkpoint_is_refuted_by_its_premise(tmp_path):
    """The load's output alone (its stage unknown): DS-Z001 stayed open on a ZeRO-2 checkpoint."""
    lines = JOB.read_text().splitlines(keepends=True)
    paste = tmp_path / "load.log"
    paste.write_text("".join(lines[LOAD_ONLY[0] - 1:LOAD_ONLY[1]]))
    report = _triage(paste, pc.layout_base("z2-dp2-fp32"))
    assert report["target"]["stage"] is None
    z001 = next(h for h in report["hypotheses"] if h["rule_id"] == "DS-Z001")
    assert z001["status"] == "refuted", z001
    assert "premise does not hold" in z001["status_reason"] and "ZeRO-2" in z001["status_reason"]
    assert report["verdict"]["rule_id"] != "DS-Z001"
    # on the ZeRO-3 checkpoint the premise holds: DS-Z001 stays open (the load's stage is unknown)
    on_zero3 = _triage(paste, pc.layout_base("z3-dp2-fp32"))
    assert next(h for h in on_zero3["hypotheses"] if h["rule_id"] == "DS-Z001")["status"] == "inconclusive"


def test_the_premise_decides_when_ds_z001_tops_the_log():
    report = _triage(JOB, pc.layout_base("z2-dp2-fp32"))
    from triage.classify.classifier import classify

    assert classify(JOB.read_text()).hypotheses[0].rule.id == "DS-Z001"  # the log's top rule
    z001 = next(h for h in report["hypotheses"] if h["rule_id"] == "DS-Z001")
    assert z001["status"] == "refuted" and "premise does not hold" in z001["status_reason"], z001
