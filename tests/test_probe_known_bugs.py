"""The version probe decides known_bug hypotheses by their releases: the rule's affected releases
against the release that ran the load (the log's DeepSpeed banner, else the deepspeed installed
here) and the one that saved the checkpoint (the shards' ds_version). Real checkpoints saved by the
installed DeepSpeed (tests/probe_checkpoints.py), real logs of the corpus, the installed releases."""

import importlib.metadata as md
import json

import pytest
from packaging.version import Version

from tests import probe_checkpoints as pc
from tests.conftest import ROOT
from triage.kb import load_rules
from triage.probe import checks, verdict
from triage.probe.context import ProbeContext
from triage.probe.known_bugs import signal
from triage.probe.safe_pickle import read_shard
from triage.probe.target import from_args

CORPUS = ROOT / "corpus"
INSTALLED = md.version("deepspeed")
RULES = load_rules()


def _rule(rule_id):
    return RULES.by_id(rule_id)


def _saved_version(root) -> str:
    """The ds_version the installed DeepSpeed wrote into the baseline's first model-states file."""
    tag = (root / "latest").read_text().strip()
    shard = sorted((root / tag).glob("*model_states.pt"))[0]
    return read_shard(str(shard)).ds_version


def _triage(cli, log, ckpt) -> dict:
    proc = cli("triage", "--log", log, "--ckpt", ckpt, "--json")
    assert proc.returncode in (0, 1), proc.stderr.decode()
    return json.loads(proc.stdout)


def _hypothesis(data, rule_id):
    return next(h for h in data["hypotheses"] if h["rule_id"] == rule_id)


def _known_bug(data, rule_id):
    version = next(p for p in data["probes"] if p["name"] == "version")
    return next(b for b in version["known_bugs"] if b["rule_id"] == rule_id)


def test_an_installed_release_with_the_bug_confirms_the_known_bug(cli):
    # ds_to_universal without --inject_missing_state (real 0.19.8 run) on a real ZeRO-2 checkpoint
    root = pc.scenario(pc.HEALTHY)
    data = _triage(cli, CORPUS / "cases" / "ds_to_universal-zero2-dp2-without-inject-missing-state.log", root)
    rng = _rule("DS-B101").releases.package("deepspeed")
    assert rng.affected.contains(Version(INSTALLED))  # the installed release has it: no fix exists
    bug = _known_bug(data, "DS-B101")
    [deepspeed] = bug["packages"]
    assert deepspeed["load"] == INSTALLED and deepspeed["load_affected"] is True
    assert deepspeed["saved"] == [_saved_version(root)] and deepspeed["fixed"] is None
    assert bug["affected"] is True and "no fixed release yet" in bug["summary"]
    hypothesis = _hypothesis(data, "DS-B101")
    assert hypothesis["status"] == "confirmed" and f"version.{signal('DS-B101')}" in hypothesis["status_reason"]


def test_releases_after_the_fix_refute_the_known_bug(cli, tmp_path):
    # zero_to_fp32 of 0.9.5 refusing a ZeRO-1 checkpoint (the rule's real capture); the script that
    # would run here, installed or saved with this checkpoint, is the installed release's: fixed in 0.10.0
    rule = _rule("DS-B105")
    log = tmp_path / "b105.log"
    log.write_text(next(e["log"] for e in rule.data["examples"] if e["expect"] == "match" and "log" in e))
    root = pc.layout_base("z1-dp2-fp32")
    data = _triage(cli, log, root)
    bug = _known_bug(data, "DS-B105")
    [deepspeed] = bug["packages"]
    fixed = Version(deepspeed["fixed"])
    assert Version(INSTALLED) >= fixed and Version(_saved_version(root)) >= fixed
    assert (deepspeed["load_affected"], deepspeed["saved_affected"], bug["affected"]) == (False, False, False)
    hypothesis = _hypothesis(data, "DS-B105")
    assert hypothesis["status"] == "refuted"
    assert hypothesis["status_reason"] == f"checked and clear: version.{signal('DS-B105')}"


def test_the_text_report_shows_the_releases_beside_the_hypothesis(cli):
    root = pc.scenario(pc.HEALTHY)
    proc = cli("triage", "--log", CORPUS / "cases" / "ds_to_universal-zero2-dp2-without-inject-missing-state.log",
               "--ckpt", root)
    out = proc.stdout.decode()
    line = next(line for line in out.splitlines() if line.strip().startswith("> version: DS-B101:"))
    assert "deepspeed >=0.11.0; no fixed release yet" in line
    assert f"the load's {INSTALLED} (installed here) affected" in line
    assert f"saved by {_saved_version(root)} affected" in line


@pytest.mark.parametrize("rule_id", ["DS-B106", "DS-B105"])
def test_the_release_the_log_names_decides_over_the_installed_one(rule_id):
    # a real 0.14.5 load log names its release in DeepSpeed's banner; the checkpoint is a real one
    # saved by the installed release
    log = (CORPUS / "releases" / "ds0.14.5-torch2.5.1" / "cases" / "zero2-dp1-latest-deleted.log").read_text()
    root = pc.scenario(pc.HEALTHY)
    rng = _rule(rule_id).releases.package("deepspeed")
    outcomes = {}
    for name, text in (("log", log), ("installed", None)):
        ctx = ProbeContext.for_path(str(root), target=from_args(None, None, None, text))
        ctx.known_bugs = ((rule_id, _rule(rule_id).releases),)
        results = checks.run(ctx, ["version"])
        [bug] = results["version"].known_bugs
        outcomes[name] = (bug, verdict.decide("known_bug", rule_id, results).status)
    bug, status = outcomes["log"]
    [deepspeed] = bug["packages"]
    assert deepspeed["affected_releases"] == _rule(rule_id).data["releases"]["deepspeed"]["affected"]  # as written
    assert deepspeed["load"] == "0.14.5" and deepspeed["installed"] == INSTALLED
    assert deepspeed["load_affected"] is rng.affected.contains(Version("0.14.5"))
    assert deepspeed["installed_affected"] is rng.affected.contains(Version(INSTALLED))
    assert "(the log, line " in bug["summary"]
    bug_here, status_here = outcomes["installed"]
    assert bug_here["packages"][0]["load"] == INSTALLED and "installed" not in bug_here["packages"][0]
    if rule_id == "DS-B106":  # 0.14.5 has it, the installed release does not: the source decides
        assert (status, status_here) == ("confirmed", "refuted")
    else:  # fixed long before both
        assert (status, status_here) == ("refuted", "refuted")


def test_probe_alone_judges_no_known_bug(cli):
    proc = cli("probe", pc.scenario(pc.HEALTHY), "--json")
    version = next(p for p in json.loads(proc.stdout)["probes"] if p["name"] == "version")
    assert "known_bugs" not in version and not any(s.startswith("release_affected:") for s in version["checked"])
