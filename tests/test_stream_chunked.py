"""The block scanner (scan.py) gives the incidents of the per-line path, to the byte.

The reference decodes every line, routes every record and lets the assembler search each
text itself (no literal hints, nothing skipped): what `stream` did line by line. The inputs
are fleets made of whole real corpus logs (corpus/fleet_log.py): healthy runs with failure
logs among them, as one plain file, as CRI container lines, and as Fluent Bit records of
many pods interleaved; fed whole and in pieces that cut lines and records anywhere.
"""

import json

import pytest

from corpus import fleet_log
from triage.stream.assemble import Limits
from triage.stream.pipeline import StreamTriage
from triage.stream.prefilter import Prefilter

CASES = sorted((fleet_log.CORPUS / "cases").glob("*.log"))


@pytest.fixture(scope="module")
def fleet():
    failures = [(f"cases/{p.stem}", fleet_log.read_lines(p)) for p in CASES[::9]]
    return fleet_log.jobs(1_500_000, failures, fleet_log.clean_logs(), pods=12)


@pytest.fixture(scope="module")
def crowded():
    """Failures one or two healthy runs apart: with 12 pods many are open at once."""
    failures = [(f"cases/{p.stem}", fleet_log.read_lines(p)) for p in CASES[::4]]
    return fleet_log.jobs(400_000, failures, fleet_log.clean_logs(), pods=12)


def encoded(fleet, envelope: str) -> bytes:
    if envelope == "plain":
        lines = fleet_log.plain_lines(fleet)
    elif envelope == "cri":
        lines = (f"2026-12-02T21:05:50.{i % 1000:03d}000000Z stderr F {line}"
                 for i, line in enumerate(fleet_log.plain_lines(fleet)))
    else:
        pods = int(envelope.split("-")[1])
        fleet = [fleet_log.Job(j.name, j.lines, j.failure, f"trainer-{n % pods}") for n, j in enumerate(fleet)]
        lines = fleet_log.fluentbit_lines(fleet)
    return ("\n".join(lines) + "\n").encode()


def chunked(rules, data: bytes, piece: int, **options) -> tuple[list[dict], dict]:
    out = []
    triage = StreamTriage(rules, out.append, **options)
    for at in range(0, len(data), piece):
        triage.feed(data[at:at + piece], 0.0)
    triage.finish(0.0)
    return out, triage.summary()


def per_line(rules, data: bytes, **options) -> list[dict]:
    out = []
    triage = StreamTriage(rules, out.append, **options)
    for raw in data.split(b"\n")[:-1]:
        triage.scanner.lines += 1
        for record in triage.decoder.decode(raw):
            triage.assembler.add(record, triage.scanner.lines, None, 0.0)
    triage.assembler.finish(0.0)
    return out


def comparable(incidents: list[dict]) -> list[str]:
    return [json.dumps(i, sort_keys=True) for i in incidents]


@pytest.mark.parametrize("envelope", ["plain", "cri", "fluentbit-12", "fluentbit-3"])
def test_blocks_give_the_per_line_incidents(rules, fleet, envelope):
    data = encoded(fleet, envelope)
    want = per_line(rules, data)
    # not vacuous: the reference path found incidents (two failures close together in one pod can
    # close as one incident, so their number is not the failures' number once pods are shared)
    assert len(want) >= sum(job.failure for job in fleet) // 2 > 0
    for piece in (len(data), 1 << 16, 4099):
        got, summary = chunked(rules, data, piece)
        assert comparable(got) == comparable(want), (envelope, piece)
        assert summary["lines"] == data.count(b"\n")


@pytest.mark.parametrize("envelope", ["plain", "fluentbit-12"])
def test_chunks_shorter_than_a_line_give_the_per_line_incidents(rules, fleet, envelope):
    """A line begun in one chunk ends in a later one, perhaps after chunks with no newline."""
    data = encoded(fleet, envelope)[:300_000]
    data = data[:data.rfind(b"\n") + 1]
    want = per_line(rules, data)
    assert want
    for piece in (97, 1021):
        got, summary = chunked(rules, data, piece)
        assert comparable(got) == comparable(want), (envelope, piece)
        assert summary["lines"] == data.count(b"\n")


@pytest.mark.parametrize("envelope", ["plain", "fluentbit-12"])
def test_blocks_give_the_per_line_incidents_under_eviction_and_short_gaps(rules, crowded, envelope):
    data = encoded(crowded, envelope)
    limits = Limits(gap=40, max_open=3, max_lines=300)
    got, summary = chunked(rules, data, 1 << 16, limits=limits)
    assert comparable(got) == comparable(per_line(rules, data, limits=limits))
    assert envelope == "plain" or summary["evicted"] > 0


def test_the_fallback_matcher_gives_the_per_line_incidents(rules, fleet):
    data = encoded(fleet, "fluentbit-12")[:400_000]
    data = data[:data.rfind(b"\n") + 1]
    slow = Prefilter(rules.rules, fast=False)
    got, _ = chunked(rules, data, 1 << 16, prefilter=slow)
    assert comparable(got) == comparable(per_line(rules, data))


def test_a_plain_fleet_takes_the_plain_path_though_the_trainer_prints_dicts(rules, fleet):
    """The HF Trainer's `{'loss': ...}` lines open with a brace but are not JSON: a plain block
    holding them is read as one stream (the fast path), and any line decode() reads as JSON or
    CRI still sends its block down the per-record path, with Hyperscan and without."""
    from triage.stream.records import Decoder

    data = encoded(fleet, "plain")
    assert b"\n{'loss': " in data  # not vacuous: the corpus's Trainer runs print them
    decoder, matcher = Decoder(), Prefilter(rules.rules).matcher
    assert decoder.plain_chunk(data, matcher.any_marker) and decoder.plain_chunk(data)
    for line in [b'{"log": "x"}', b'  {"log": "x"}', b'\xef\xbb\xbf{"a": 1}', b"{ }", b'[{"a": 1}]', b"[ [1]]",
                 b"[\xc2\xa0{}]", b"2026-12-02T21:05:50.1Z stdout F text", b'{\t"log": "x"}']:
        block = data[:data.index(b"\n", 5000) + 1] + line + b"\n"
        assert not decoder.plain_chunk(block, matcher.any_marker), line
        assert not decoder.plain_chunk(block), line


def test_a_run_start_line_that_a_rule_reads_stays_newer_than_the_waiting_context(tmp_path):
    """The plain path settles runs of context lines late, after run-start lines were routed. A
    rule line that matches both a run-start line (torchrun's OMP_NUM_THREADS notice) and an
    ordinary one (DeepSpeed's op build notice) must see the newest of them, as the per-line path
    does: here the run start of the failing job, not the healthy job's build notice before it."""
    from tests.rule_files import rules_dir, valid_rule
    from triage.kb import load_rules

    rule = valid_rule().replace("        verify:", "          boosts:\n"
                                "            - line: 'OMP_NUM_THREADS environment variable|shm_comm_op built successfully'\n"
                                "              weight: 0.1\n              why: test\n        verify:", 1)
    rules = load_rules(rules_dir(tmp_path, {"DS-T001-test.yaml": rule}), use_cache=False)
    healthy = fleet_log.read_lines(fleet_log.CORPUS / "clean" / "accelerate-random-states-deleted.log")
    failing = fleet_log.read_lines(fleet_log.CORPUS / "cases" / "trainer-trainer-state-deleted.log")
    data = ("\n".join(healthy + failing) + "\n").encode()
    want = per_line(rules, data)
    assert want and any("OMP_NUM_THREADS" in line for line in json.dumps(want[0]).split("\\n"))  # not vacuous
    got, _ = chunked(rules, data, len(data))
    assert comparable(got) == comparable(want)
