"""`stream` with a fleet failing at once: 1,000 pods, each a real corpus failure log, their
records interleaved in one Fluent Bit feed with 100 more pods' healthy training chatter.
Every pod's incident is emitted once, whole, with the category `classify` gives the same log
alone: the other pods' lines are neither its lines nor its context."""

import json
from collections import Counter
from pathlib import Path

import pytest

from tests import stream_envelopes as env
from triage.classify.classifier import classify
from triage.stream.assemble import Limits
from triage.stream.emit import is_incident
from triage.stream.pipeline import StreamTriage

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
PODS = 1000


def outcome(incident: dict):
    c = incident["classification"]
    return c["category"], c["hypotheses"][0]["rule_id"] if c["hypotheses"] else None


@pytest.fixture(scope="module")
def failures(rules):
    """(case name, its lines, what classify says of it alone) for every corpus case that is one incident."""
    found = []
    for path in sorted((CORPUS / "cases").glob("*.log")):
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        report = classify("\n".join(lines) + "\n", rules=rules)
        if is_incident(report):
            found.append((path.stem, lines, (report.category, report.top.rule.id if report.top else None)))
    assert len(found) > 50
    return found


def run_fleet(rules, per_pod: list[list[str]], limits: Limits, chatter: list[list[str]] = ()) -> tuple[list[dict], dict]:
    streams = [[json.dumps(r) for r in env.fluentbit(lines, f"trainer-{n}")] for n, lines in enumerate(per_pod)]
    streams += [[json.dumps(r) for r in env.fluentbit(lines, f"healthy-{n}")] for n, lines in enumerate(chatter)]
    records = env.interleave(streams)
    out = []
    triage = StreamTriage(rules, out.append, limits=limits)
    triage.feed(("\n".join(records) + "\n").encode(), 0.0)
    triage.finish(0.0)
    return out, triage.summary()


def test_a_thousand_pods_failing_at_once_each_get_one_whole_incident(rules, failures):
    pods = [failures[n % len(failures)] for n in range(PODS)]
    clean = sorted((CORPUS / "clean").glob("*.log"))
    chatter = [clean[n % len(clean)].read_text(encoding="utf-8", errors="replace").splitlines() for n in range(100)]
    incidents, summary = run_fleet(rules, [lines for _, lines, _ in pods], Limits(idle=3600), chatter)
    per_pod = Counter(i["stream"]["kubernetes.pod_name"] for i in incidents)
    assert sorted(per_pod) == sorted(f"trainer-{n}" for n in range(PODS))  # none lost
    assert set(per_pod.values()) == {1}  # none split, none emitted twice
    assert summary["evicted"] == 0
    wrong = [(name, want, outcome(i)) for i in incidents
             for name, _, want in [pods[int(i["stream"]["kubernetes.pod_name"].split("-")[1])]]
             if outcome(i) != want]
    assert wrong == []


def test_over_the_memory_budget_the_stalest_is_emitted_and_counted(rules, failures):
    """With room for fewer incidents than pods, incidents are closed early, never dropped: each
    eviction is counted, and every pod still has at least one incident."""
    pods = [lines for _, lines, _ in failures[:40]]
    incidents, summary = run_fleet(rules, pods, Limits(idle=3600, max_open=10))
    assert summary["evicted"] > 0
    assert {i["stream"]["kubernetes.pod_name"] for i in incidents} == {f"trainer-{n}" for n in range(40)}
    assert sum(i["closed_by"] == "evicted" for i in incidents) <= summary["evicted"]
