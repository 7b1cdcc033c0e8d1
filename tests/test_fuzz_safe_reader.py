"""Fuzz (hypothesis, a bounded example count): the safe reader on generated pickle opcode
streams, on real shards' pickles mutated and on real shards' pickles with a shared-reference
DAG added (issue 40), and the log parser on generated text.

The reader must return a ShardMeta (read, or an error / over-cap verdict) for every stream,
never raise, never call what a stream names (a marker file would appear), and never change the
shared stand-in table. The longer run is benchmarks/fuzz_safe_reader.py.
"""

import json
import zipfile

from hypothesis import HealthCheck, given, settings

from tests import probe_checkpoints as pc
from tests.hostile import pickles as hp
from triage.logs.parse import parse
from triage.probe.checks.version import label
from triage.probe.pickle_bounds import MAX_NODES, SHOWN_CHARS
from triage.probe.safe_pickle import ALLOWED, read_shard

EXAMPLES = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_reader(data: bytes, shard, marker):
    """The property: read_shard on `data` as a shard's data.pkl (shared with the benchmark)."""
    with zipfile.ZipFile(shard, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("archive/data.pkl", data)
        zf.writestr("archive/version", "3\n")
    meta = read_shard(str(shard))
    json.dumps(meta.to_json(), default=repr)  # what the report prints of it is printable
    assert meta.over_cap is None or meta.error, "over a cap is also not read"
    assert not marker.exists(), "a stream's global was called"
    assert ALLOWED[("torch", "FloatStorage")].dtype == "float32", "the shared stand-ins changed"
    return meta


def real_pickles() -> list[bytes]:
    out = []
    for shard in sorted(pc.baselines().glob("*/global_step*/*.pt")):
        with zipfile.ZipFile(shard) as zf:
            out.append(zf.read(hp.data_pkl_name(zf)))
    return out


def test_safe_reader_on_generated_opcode_streams(tmp_path):
    marker = tmp_path / "ran"

    @EXAMPLES
    @given(hp.opcode_streams(str(marker)))
    def run(data):
        check_reader(data, tmp_path / "shard.pt", marker)

    run()


def test_safe_reader_on_mutated_real_pickles(tmp_path):
    marker = tmp_path / "ran"

    @EXAMPLES
    @given(hp.mutated(real_pickles()))
    def run(data):
        check_reader(data, tmp_path / "shard.pt", marker)

    run()


def test_safe_reader_on_real_pickles_with_a_dag(tmp_path):
    """A DAG over MAX_NODES (counted with shared references each time) is over the cap, whether built bottom
    up, filled after it was shared, or hashed as a key; one well under it is read; what the report shows of
    ds_version is one short line either way."""
    marker = tmp_path / "ran"

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(hp.dag_shaped(real_pickles()))
    def run(case):
        data, nodes = case
        meta = check_reader(data, tmp_path / "shard.pt", marker)
        if nodes > MAX_NODES:
            assert meta.over_cap and "shared references" in meta.over_cap, meta.error
        elif 2 * nodes + 10_000 < MAX_NODES:
            assert meta.error is None, meta.error
        assert len(label(meta.ds_version)) <= SHOWN_CHARS

    run()


@settings(max_examples=300, deadline=None)
@given(hp.log_texts())
def test_log_parser_on_generated_text(text):
    incident, lines = parse(text)
    assert incident.line_count == len(lines)
