"""A file read by several processes (split.py) gives what one process gives, to the byte (but
for the summary's count of records decoded, a count of work).

Fleets made of whole real corpus logs (corpus/fleet_log.py), plain and as Fluent Bit records of
12 pods, are cut at many line starts: where nothing is open (a child's part is taken, its
incidents' context completed from this process's streams) and inside incidents (the part is
read here instead). Every cut gives the incidents and the counts of one process reading it all.
"""

import json
import os
import time

import pytest

from tests.test_stream_chunked import encoded, fleet  # noqa: F401 - the fixture
from triage.stream.assemble import Limits
from triage.stream.pipeline import StreamTriage
from triage.stream.source import pump
from triage.stream.split import pump_parts


def _counts(summary: dict) -> dict:
    """The summary but its time and `records`: the records decoded, a count of work, which a
    child's part started with no stream known can make larger (the incidents are not changed)."""
    return {k: v for k, v in summary.items() if k not in ("seconds", "records")}


def _run(rules, path, starts=None, limits=None):
    out = []
    triage = StreamTriage(rules, out.append, limits=limits)
    fd = os.open(path, os.O_RDONLY)
    try:
        taken = pump_parts(fd, triage, starts, os.path.getsize(path)) if starts else pump(fd, triage)
    finally:
        os.close(fd)
    summary = _counts(triage.summary())
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


def _quiet_starts(rules, data: bytes) -> list[int]:
    """The line starts at which one process reading the data has nothing open (no incident, no
    line cut): where a child's part can begin or end and still be taken."""
    triage = StreamTriage(rules, lambda incident: None)
    quiet, at = [], 0
    for line in data.splitlines(keepends=True):
        if at and not triage.assembler.busy:
            quiet.append(at)
        now = time.monotonic()
        triage.feed(line, now)
        triage.tick(now)
        at += len(line)
    return quiet


def test_many_parts_over_several_children_give_one_process_answer(rules, fleet_file):
    """16 parts, 5 a child, cut where one process has nothing open and once right inside a
    traceback: exactly the parts that begin and end with nothing open are taken from the
    children (the others are read here). The cuts come from the data, not from where its logs
    happen to fall."""
    path, data, want = fleet_file
    quiet = _quiet_starts(rules, data)
    inside = data.find(b"\n", data.index(b"Traceback (most recent call last):")) + 1
    starts = sorted({0, inside, *(quiet[len(quiet) * k // 15] for k in range(1, 15))})
    out = []
    triage = StreamTriage(rules, out.append)
    fd = os.open(path, os.O_RDONLY)
    try:
        taken = pump_parts(fd, triage, starts, len(data), per_child=5)
    finally:
        os.close(fd)
    summary = _counts(triage.summary())
    assert ([json.dumps(i, sort_keys=True) for i in out], summary) == want
    ends = set(quiet) | {len(data)}
    takeable = sum(start in ends and end in ends for start, end in zip(starts[1:], starts[2:] + [len(data)]))
    assert taken == takeable >= 10, (taken, takeable)


def test_more_streams_than_remembered_make_the_part_read_here(rules, fleet, tmp_path):  # noqa: F811
    data = encoded(fleet, "fluentbit-12")
    path = tmp_path / "fleet.jsonl"
    path.write_bytes(data)
    """12 pods, 8 remembered: one process drops streams, which a child reading from an empty
    state cannot see; so a part is read here unless its streams fit beside those held here.
    (Past max_streams the scanner's answer depends on where its blocks end, as its text says:
    only the refusals are compared here. Which parts still fit depends on where the fleet's
    logs fall, so the count refused is compared with the same cuts read without the limit.)"""
    limits = Limits(max_streams=8)
    # cut only once every pod has written (before that, fewer than 8 streams may be open, and a
    # part is rightly taken), and where nothing is open, so that only the limit refuses a part
    pods = set()
    for n, line in enumerate(data.splitlines(keepends=True)):
        pods.add(json.loads(line)["kubernetes"]["pod_name"])
        if len(pods) == 12:
            break
    all_started = sum(map(len, data.splitlines(keepends=True)[:n + 1]))
    quiet = [at for at in _quiet_starts(rules, data) if at > all_started]
    starts = [0, *sorted({quiet[len(quiet) * k // 15] for k in range(15)})]
    got, _, taken = _run(rules, path, starts, limits=limits)
    assert got
    unlimited = _run(rules, path, starts)[2]
    # without the limit, most of these cuts are taken; with it, most are refused
    assert taken < len(starts) // 2 < unlimited, (taken, unlimited, len(starts))


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
    summary = _counts(triage.summary())
    assert ([json.dumps(i, sort_keys=True) for i in out], summary) == want
    assert len(taken) == 1  # it was cut (whether each part was taken depends on where incidents stand)
