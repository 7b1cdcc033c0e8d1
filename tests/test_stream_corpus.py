"""`stream` finds what `classify` finds: every corpus log, plain and in shippers' envelopes.

The prefilter keeps most lines from the classifier; these tests are its proof that it loses
no incident: each failure log comes out as exactly one incident with the category and top
rule `classify` gives the whole file, and each clean log comes out as nothing.
"""

import json
import platform
from pathlib import Path

import pytest

from tests import stream_envelopes as env
from triage.classify.classifier import classify
from triage.kb.examples import iter_examples
from triage.stream.emit import is_incident
from triage.stream.pipeline import StreamTriage
from triage.stream.prefilter import Prefilter
from triage.stream.records import Decoder

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
CASES = sorted((CORPUS / "cases").glob("*.log"))
CLEAN = sorted((CORPUS / "clean").glob("*.log"))


def expected(rules, text: str):
    """What classify says of the whole log: (category, top rule), or None for no incident."""
    report = classify(text, rules=rules)
    return (report.category, report.top.rule.id if report.top else None) if is_incident(report) else None


def streamed(rules, data: bytes, prefilter=None, **options) -> list[dict]:
    out = []
    triage = StreamTriage(rules, out.append, prefilter=prefilter or shared_prefilter(rules), **options)
    triage.feed(data, 0.0)
    triage.finish(0.0)
    return out


_PREFILTERS: dict[int, tuple] = {}


def shared_prefilter(rules) -> Prefilter:
    """One prefilter per rule set, as `stream` keeps one for all its streams: building it (0.1 s)
    for each of some 500 logs and examples was most of these tests' time."""
    if id(rules) not in _PREFILTERS:
        _PREFILTERS[id(rules)] = (rules, Prefilter(rules.rules))  # the rules held, so the id stays theirs
    return _PREFILTERS[id(rules)][1]


def outcome(incident: dict):
    c = incident["classification"]
    return c["category"], c["hypotheses"][0]["rule_id"] if c["hypotheses"] else None


@pytest.mark.parametrize("path", CASES + CLEAN, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_stream_agrees_with_classify(rules, path):
    data = path.read_bytes()
    want = expected(rules, data.decode("utf-8", errors="replace"))
    got = [outcome(i) for i in streamed(rules, data)]
    assert got == ([want] if want else []), f"classify: {want}, stream: {got}"


def test_rule_examples_stream_like_they_classify(rules):
    """Every inline or file example a rule must match is found by `stream` as well."""
    failures = []
    for example in iter_examples(rules):
        if example.expect != "match":
            continue
        want = expected(rules, example.text)
        got = [outcome(i) for i in streamed(rules, example.text.encode())]
        # a log of several launchers (two torchrun "nodes" in one file) streams as an incident per
        # launcher, as each node's own stream would: the first is the failure classify reads
        launchers = max(1, example.text.count("\ntorch.distributed.elastic.multiprocessing.errors.ChildFailedError"))
        if got[:1] != [want] or len(got) != launchers:
            failures.append(f"{example.rule_id} {example.label}: classify {want}, stream {got}")
    assert not failures, "\n".join(failures)


def test_the_standard_library_fallback_gives_the_same_incidents(rules):
    slow = Prefilter(rules.rules, fast=False)
    assert not slow.matcher.complete
    if platform.machine() == "x86_64":  # pyproject installs hyperscan there: the comparison is fast vs fallback
        assert Prefilter(rules.rules).matcher.complete
    for path in CASES[::9] + CLEAN[::20]:
        data = path.read_bytes()
        assert [outcome(i) for i in streamed(rules, data, prefilter=slow)] == [outcome(i) for i in streamed(rules, data)]


PODS = ["zero3-saved-stage2-load-dp2", "pp2-saved-load-pp1", "zero2-dp1-latest-deleted",
        "zero2-dp2-optim-shard-truncated", "tp2-saved-load-tp1"]


def _cases_present():
    return [name for name in PODS if (CORPUS / "cases" / f"{name}.log").exists()]


@pytest.mark.parametrize("shape", ["fluentbit", "vector", "logcli", "es_hits"])
def test_interleaved_pods_in_an_envelope_each_get_their_own_incident(rules, shape):
    names = _cases_present()
    per_pod = []
    for n, name in enumerate(names):
        lines = env.case_lines(name)
        if shape == "fluentbit":
            raws = [json.dumps(r) for r in env.fluentbit(lines, f"trainer-{n}")]
        elif shape == "vector":
            raws = [json.dumps(r) for r in env.vector(lines, f"trainer-{n}")]
        elif shape == "logcli":
            raws = env.logcli(lines, f"trainer-{n}")
        else:
            raws = env.es_hits(lines, f"trainer-{n}")
        per_pod.append(raws)
    data = ("\n".join(env.interleave(per_pod)) + "\n").encode()
    incidents = streamed(rules, data)
    pod_field = {"fluentbit": "kubernetes.pod_name", "vector": "kubernetes.pod_name", "logcli": "pod",
                 "es_hits": "kubernetes.pod.name"}[shape]
    got = {i["stream"][pod_field]: outcome(i) for i in incidents}
    assert len(incidents) == len(names)  # each once
    for n, name in enumerate(names):
        assert got[f"trainer-{n}"] == expected(rules, "\n".join(env.case_lines(name)) + "\n"), name
    assert all(i["time"]["first"].startswith("2026-12-02T21:05:5") for i in incidents)


@pytest.mark.parametrize("shape", ["docker", "cri"])
def test_one_container_log_file(rules, shape):
    name = PODS[0]
    lines = env.case_lines(name)
    raws = env.docker(lines) if shape == "docker" else env.cri(lines)
    incidents = streamed(rules, ("\n".join(raws) + "\n").encode())
    assert [outcome(i) for i in incidents] == [expected(rules, "\n".join(lines) + "\n")]
    assert incidents[0]["stream"] == {}


def test_loki_query_range_answer_on_one_line(rules):
    names = _cases_present()[:3]
    doc = env.loki_query_range({f"trainer-{n}": env.case_lines(name) for n, name in enumerate(names)})
    incidents = streamed(rules, doc.encode() + b"\n")
    got = {i["stream"]["pod"]: outcome(i) for i in incidents}
    assert got == {f"trainer-{n}": expected(rules, "\n".join(env.case_lines(name)) + "\n") for n, name in enumerate(names)}


def test_forced_plain_format_reads_json_as_text(rules):
    raws = env.docker(env.case_lines(PODS[0]))
    incidents = streamed(rules, ("\n".join(raws) + "\n").encode(), decoder=Decoder("plain"))
    # the traceback lines are JSON strings now: no parseable traceback, no rule may claim it
    assert all(outcome(i)[0] == "unknown" for i in incidents)
