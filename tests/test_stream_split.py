"""A file read by several processes (split.py) gives what one process gives, to the byte.

Fleets made of whole real corpus logs (corpus/fleet_log.py), plain and as Fluent Bit records of
12 pods, are cut at many line starts: where nothing is open (a child's part is taken, its
incidents' context completed from this process's streams) and inside incidents (the part is
read here instead). Every cut gives the incidents and the counts of one process reading it all.
"""

import json
import os

import pytest

from tests.test_stream_chunked import encoded, fleet  # noqa: F401 - the fixture
from triage.stream.assemble import Limits
from triage.stream.pipeline import StreamTriage
from triage.stream.source import pump
from triage.stream.split import pump_parts


def _run(rules, path, starts=None, limits=None):
    out = []
    triage = StreamTriage(rules, out.append, limits=limits)
    fd = os.open(path, os.O_RDONLY)
    try:
        taken = pump_parts(fd, triage, starts, os.path.getsize(path)) if starts else pump(fd, triage)
    finally:
        os.close(fd)
    summary = {k: v for k, v in triage.summary().items() if k != "seconds"}
    return [json.dumps(i, sort_keys=True) for i in out], summary, taken


def _line_starts(data: bytes, count: int) -> list[int]:
    """`count` line starts spread over the data."""
    starts = []
    for k in range(1, count + 1):
        at = data.find(b"\n", len(data) * k // (count + 1)) + 1
        if 0 < at < len(data):
            starts.append(at)
    return sorted(set(starts))


@pytest.fixture(scope="module", params=["plain", "fluentbit-12"])
def fleet_file(request, rules, fleet, tmp_path_factory):  # noqa: F811
    data = encoded(fleet, request.param)
    path = tmp_path_factory.mktemp("split") / f"fleet-{request.param}.log"
    path.write_bytes(data)
    want = _run(rules, path)
    assert len(want[0]) > 3
    return path, data, want[:2]


def test_each_cut_gives_one_process_answer(rules, fleet_file):
    path, data, want = fleet_file
    for cut in _line_starts(data, 8):
        got, summary, _ = _run(rules, path, [0, cut])
        assert (got, summary) == want, cut


def test_a_cut_inside_an_incident_is_read_here(rules, fleet_file):
    """Cut right after a traceback's first line: the child would read the rest as new lines."""
    path, data, want = fleet_file
    cut = data.find(b"\n", data.index(b"Traceback (most recent call last):")) + 1
    got, summary, taken = _run(rules, path, [0, cut])
    assert (got, summary) == want
    assert taken == 0


def test_many_parts_over_several_children_give_one_process_answer(rules, fleet_file):
    """16 parts, 5 a child: those that begin and end with nothing open are taken from the
    children (the others are read here)."""
    path, data, want = fleet_file
    starts = [0, *_line_starts(data, 15)]
    out = []
    triage = StreamTriage(rules, out.append)
    fd = os.open(path, os.O_RDONLY)
    try:
        taken = pump_parts(fd, triage, starts, len(data), per_child=5)
    finally:
        os.close(fd)
    summary = {k: v for k, v in triage.summary().items() if k != "seconds"}
    assert ([json.dumps(i, sort_keys=True) for i in out], summary) == want
    assert taken >= 1, taken


def test_more_streams_than_remembered_make_the_part_read_here(rules, fleet, tmp_path):  # noqa: F811
    data = encoded(fleet, "fluentbit-12")
    path = tmp_path / "fleet.jsonl"
    path.write_bytes(data)
    """12 pods, 8 remembered: one process drops streams, which a child reading from an empty
    state cannot see; so every part is read here. (Past max_streams the scanner's answer
    depends on where its blocks end, as its text says: only the refusal is compared here.)"""
    limits = Limits(max_streams=8)
    got, _, taken = _run(rules, path, [0, *_line_starts(data, 15)], limits=limits)
    assert got and taken == 0
    assert _run(rules, path, [0, *_line_starts(data, 15)])[2] > 0  # the same cuts are taken without the limit


def test_a_large_file_is_cut_at_line_starts_into_shares_and_parts(tmp_path):
    from triage.stream.split import MIN_SHARE, PIECES, parts

    path = tmp_path / "big.log"
    line = b"x" * 99 + b"\n"
    path.write_bytes(line * (3 * MIN_SHARE // len(line) + 1))
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.path.getsize(path)
        starts = parts(fd, size, 2)
        assert len(starts) == 1 + PIECES and starts[0] == 0
        assert all(at % len(line) == 0 for at in starts)  # each a line start
        assert abs(starts[1] - size // 2) < len(line)  # this process's share: the first half
        assert parts(fd, size, 1) == [0] and len(parts(fd, size, 8)) == 1 + 2 * PIECES  # 3 shares fit
        small = tmp_path / "small.log"
        small.write_bytes(line * 1000)
        fd_small = os.open(small, os.O_RDONLY)
        assert parts(fd_small, 100_000, 2) == [0]
        os.close(fd_small)
    finally:
        os.close(fd)


def test_a_child_that_fails_leaves_its_parts_to_this_process(rules, fleet_file, monkeypatch):
    """A child that dies (here: its reading raises) sends nothing: its parts are read here."""
    from triage.stream import split

    path, data, want = fleet_file

    def broken(*args):
        raise RuntimeError("a child's failure")

    monkeypatch.setattr(split, "_read_part", broken)  # the forked child runs this copy
    got, summary, taken = _run(rules, path, [0, *_line_starts(data, 3)])
    assert (got, summary) == want
    assert taken == 0


def test_pump_with_jobs_cuts_a_large_enough_file_and_gives_the_same_answer(rules, fleet_file, monkeypatch):
    """The path `stream --jobs 2` takes (source.pump), with the size a share needs lowered to fit
    the test's fleet."""
    from triage.stream import split

    path, data, want = fleet_file
    monkeypatch.setattr(split, "MIN_SHARE", len(data) // 3)
    taken = []
    monkeypatch.setattr(split, "pump_parts", lambda *a, **k: taken.append(pump_parts(*a, **k)))
    out = []
    triage = StreamTriage(rules, out.append)
    fd = os.open(path, os.O_RDONLY)
    try:
        pump(fd, triage, jobs=2)
    finally:
        os.close(fd)
    summary = {k: v for k, v in triage.summary().items() if k != "seconds"}
    assert ([json.dumps(i, sort_keys=True) for i in out], summary) == want
    assert len(taken) == 1  # it was cut (whether each part was taken depends on where incidents stand)
