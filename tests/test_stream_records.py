"""Records from shippers' envelopes: the text, the stream key, the time; bad lines counted."""

import json

import pytest

from tests import stream_envelopes as env
from triage.stream.records import Decoder, find

CASE = "zero3-saved-stage2-load-dp2"
LINES = env.case_lines(CASE)
TRACEBACK = next(line for line in LINES if "Traceback" in line)  # "[rank1]: Traceback (most recent call last):"
LONG = max(LINES, key=len)  # the config dump's zero_config line, ~1,900 characters


def decode_all(decoder, raw_lines):
    return [r for raw in raw_lines for r in decoder.decode(raw.encode() if isinstance(raw, str) else raw)]


def test_plain_lines_are_one_unnamed_stream_even_when_they_open_with_a_bracket():
    records = decode_all(Decoder(), LINES[:40])
    assert [r.text for r in records] == LINES[:40]
    assert {r.key for r in records} == {()}
    assert Decoder().decode(b"{")[0].text == "{"  # a config dump's brace is not JSON


def test_docker_json_file_lines_and_a_split_long_line():
    raws = env.docker([TRACEBACK, LONG])
    records = decode_all(Decoder(), raws)
    assert [r.text for r in records] == [TRACEBACK, LONG]
    assert records[0].key == () and records[0].time.startswith("2026-12-02T21:05:50")
    # Docker splits lines over 16 KiB: the first part has no trailing newline
    head, tail = LONG[:700], LONG[700:]
    split = [json.dumps({"log": head, "stream": "stdout", "time": env.rfc3339(1)}),
             json.dumps({"log": tail + "\n", "stream": "stdout", "time": env.rfc3339(1)})]
    parts = decode_all(Decoder(), split)
    assert [p.partial for p in parts] == [True, False]
    assert "".join(p.text for p in parts) == LONG


def test_cri_lines_with_partial_flag():
    records = decode_all(Decoder(), env.cri([TRACEBACK]))
    assert records[0].text == TRACEBACK and records[0].time == env.rfc3339(0) and not records[0].partial
    parts = decode_all(Decoder(), [f"{env.rfc3339(0)} stdout P {LONG[:500]}", f"{env.rfc3339(0)} stdout F {LONG[500:]}"])
    assert [p.partial for p in parts] == [True, False] and "".join(p.text for p in parts) == LONG
    assert Decoder("cri").decode(b"not a cri line") == []
    decoder = Decoder("cri")
    decoder.decode(b"not a cri line")
    assert decoder.stats["malformed"] == 1


def test_fluentbit_record_names_its_pod_and_converts_its_date():
    record, = Decoder().from_value(env.fluentbit([TRACEBACK], "trainer-3"))
    assert record.text == TRACEBACK
    assert dict(record.key) == {"kubernetes.namespace_name": "ml-train", "kubernetes.pod_name": "trainer-3",
                                "kubernetes.container_name": "trainer", "kubernetes.host": "gpu-node-3"}
    assert record.time == "2026-12-02T21:05:50.000000000Z"  # the record's own time wins


def test_vector_record_names_its_pod():
    record, = Decoder().from_value(env.vector([TRACEBACK], "trainer-1"))
    assert record.text == TRACEBACK
    assert dict(record.key)["kubernetes.pod_name"] == "trainer-1"
    assert dict(record.key)["kubernetes.pod_namespace"] == "ml-train"
    assert dict(record.key)["kubernetes.pod_node_name"] == "gpu-node-3"


def test_loki_query_range_is_resorted_oldest_first_per_stream():
    doc = env.loki_query_range({"trainer-0": LINES[:5], "trainer-1": LINES[5:8]})
    records = Decoder().decode(doc.encode())
    by_pod = {}
    for r in records:
        by_pod.setdefault(dict(r.key)["pod"], []).append(r.text)
    assert by_pod == {"trainer-0": LINES[:5], "trainer-1": LINES[5:8]}
    assert records[0].time.endswith("Z") and records[0].time < records[1].time


def test_logcli_jsonl_stream_is_its_label_set():
    record, = decode_all(Decoder(), env.logcli([TRACEBACK], "trainer-2"))
    assert record.text == TRACEBACK
    assert dict(record.key) == {"container": "trainer", "job": "ml-train/trainer", "namespace": "ml-train", "pod": "trainer-2"}


@pytest.mark.parametrize("shape", ["hits", "bulk", "search"])
def test_elasticsearch_exports(shape):
    lines = LINES[25:30]
    if shape == "hits":
        raws = env.es_hits(lines, "trainer-5")
    elif shape == "bulk":
        raws = env.es_bulk(lines, "trainer-5")
    else:
        raws = [env.es_search(lines, "trainer-5")]
    decoder = Decoder()
    records = decode_all(decoder, raws)
    assert [r.text for r in records] == lines  # ECS `log` is an object: `message` is taken
    assert dict(records[0].key) == {"kubernetes.namespace": "ml-train", "kubernetes.pod.name": "trainer-5",
                                    "kubernetes.container.name": "trainer", "host.name": "gpu-node-3"}
    assert decoder.stats["malformed"] == 0 and decoder.stats["no_message"] == 0


def test_dotted_paths_reach_nested_and_flattened_keys():
    record = {"kubernetes.pod_name": "flat", "kubernetes": {"labels": {"app.kubernetes.io/name": "trainer"}}}
    assert find(record, "kubernetes.pod_name") == "flat"
    assert find(record, "kubernetes.labels.app.kubernetes.io/name") == "trainer"
    assert find(record, "kubernetes.missing") is None


def test_message_and_key_fields_can_be_chosen():
    raw = json.dumps({"payload": {"text": TRACEBACK}, "job": "resume-7b", "rank": 3, "log": "not this"})
    record, = Decoder("json", ("payload.text",), ("job", "rank")).decode(raw.encode())
    assert record.text == TRACEBACK and record.key == (("job", "resume-7b"), ("rank", "3"))


def test_malformed_lines_are_counted_not_fatal_and_bad_bytes_survive():
    decoder = Decoder()
    good = env.docker([TRACEBACK])[0].encode()
    cut = good[: len(good) // 2]  # a shipper's line cut in the middle
    garbage = b"\x00\xff\xfe\x89PNG\r\n\x1a"[:7] + TRACEBACK.encode() + b"\xff"
    records = decode_all(decoder, [good, cut, garbage, b'{"no": "message here"}', b'[{"log": "ok\\n"}, 7]'])
    assert decoder.stats == {"records": 4, "malformed": 2, "no_message": 1}
    assert records[0].text == TRACEBACK
    assert records[1].text == cut.decode()  # auto: a line that only looked like JSON stays as text
    assert "\ufffd" in records[2].text and TRACEBACK in records[2].text
    strict = Decoder("docker")
    assert strict.decode(cut) == [] and strict.stats["malformed"] == 1


def _search_decoder(format="auto", *fields):
    """A Decoder that finds every field by the per-record search, with the standard library's parser."""
    decoder = Decoder(format, *fields)
    decoder._loads = None
    decoder._plan = lambda obj: None
    return decoder


AWKWARD = [
    json.dumps({"log": TRACEBACK + "\n", "kubernetes": {"pod_name": 18446744073709551616, "host": True}}),  # past 64 bits
    '{"log": "a\\ud800b\\n", "kubernetes": {"pod_name": "p"}}',  # a lone surrogate
    '{"log": "nan\\n", "date": NaN, "kubernetes": {"pod_name": "p"}}',
    '{"log": "big\\n", "date": 1e400}',
    '{"message": {"nested": 1}, "log": 7, "msg": "third choice", "kubernetes": {"pod": {"name": "n"}}}',
    '{"log": "no newline", "stream": "stderr", "time": "2026-12-02T21:05:50Z"}',  # a Docker partial line
    '{"log": "x\\n", "stream": "stderr", "kubernetes": "not an object", "host": {"name": "h"}}',
    '{"kubernetes.pod_name": "flat", "log": "dotted\\n"}',
    '{"index": {"_index": "x"}}',
    '{"hits": {"hits": [{"_source": {"message": "in a search answer"}}]}}',
    '{"labels": {"pod": "p"}, "line": "logcli", "timestamp": "t"}',
    '{"date": 1.5, "log": "caf\\u00e9 \\"quoted\\"\\n", "kubernetes": {"pod_name": "trainer-0"}}',
]


@pytest.mark.parametrize("parser", ["msgspec", "orjson", "json"])
@pytest.mark.parametrize("format", ["auto", "json", "fluentbit", "elasticsearch"])
def test_parsers_and_field_plans_give_what_the_search_gives(parser, format):
    """The fast parsers read the bytes and each record shape's field paths are worked out once:
    the records are those the standard library and the per-record search give (msgspec keeps
    integers of any size; orjson makes one past 64 bits a float, hence not the default)."""
    from triage.stream.records import fast_parser

    name, loads = fast_parser(parser)
    if name != parser:
        pytest.skip(f"{parser} is not installed")
    fast = Decoder(format)
    if parser != "msgspec":  # msgspec is the default: resolved as in use, with its shape readers
        fast._loads = loads
    lines = AWKWARD if parser != "orjson" else AWKWARD[1:]
    raws = [line.encode() for line in lines] + [b"\xff" + lines[0].encode()]
    want = _search_decoder(format)
    assert decode_all(fast, raws) == decode_all(want, raws)
    assert fast.stats == want.stats


def _fluentbit(**changes) -> dict:
    record = {"date": 1.5, "log": "step 3\n", "stream": "stderr",
              "kubernetes": {"pod_name": "trainer-0", "namespace_name": "ml", "container_name": "c", "host": "h"}}
    record.update(changes)
    return record


# Each after a record of the usual shape, so msgspec's reader of that shape meets it first.
SHAPE_VARIANTS = [
    json.dumps(_fluentbit(kubernetes={"pod_name": "trainer-1", "namespace_name": "ml", "container_name": "c", "host": "h"})),
    json.dumps(dict(reversed(list(_fluentbit().items())))),  # the same fields in another order
    json.dumps(_fluentbit(extra=1)),
    json.dumps({k: v for k, v in _fluentbit().items() if k != "date"}),
    json.dumps(_fluentbit(log=7)),
    json.dumps(_fluentbit(log="no newline")),
    json.dumps(_fluentbit(kubernetes="not an object")),
    json.dumps(_fluentbit(kubernetes={"pod_name": 18446744073709551616})),  # past 64 bits
    json.dumps(_fluentbit(kubernetes={"pod": {"name": "nested"}, "host": None})),
    json.dumps(_fluentbit(log='caf\u00e9 "quoted"\n')),
    json.dumps(_fluentbit(), separators=(",", ":")),  # the same key in other bytes
    '{"date": NaN, "log": "nan\\n", "stream": "stderr", "kubernetes": {"pod_name": "p"}}',
    '{"date": 1, "log": "big\\n", "stream": "stderr", "kubernetes": {"pod_name": 1e400}}',
    '{"date": 1, "log": "a\\ud800b\\n", "stream": "stderr", "kubernetes": {"pod_name": "p"}}',
    '{"date": 1, "log": "first\\n", "log": "second\\n", "stream": "stderr", "kubernetes": {"pod_name": "p"}}',
    '{"date": 1, "log": "cut", "stream": "stderr", "kubernetes": {"pod_name": "p", "x": [1, }}',
    json.dumps({"@timestamp": "t", "message": "ecs\n", "kubernetes": {"pod": {"name": "x"}}}),
    json.dumps({"log": "docker part", "stream": "stdout", "time": "t"}),  # a Docker partial line
]


@pytest.mark.parametrize("format", ["auto", "json", "fluentbit"])
def test_records_of_a_known_shape_read_straight_into_its_fields_are_those_the_search_gives(format):
    """After one record of a shape, msgspec decodes the next ones of that shape into its fields
    (records._Typed): a field more or less, another order, a value msgspec refuses, or the same
    stream key written in other bytes gives what the general path and the search give."""
    from triage.stream.records import _Typed

    raws = []
    for variant in SHAPE_VARIANTS:
        raws += [json.dumps(_fluentbit()).encode(), variant.encode(), variant.encode()]
    fast, want = Decoder(format), _search_decoder(format)
    assert decode_all(fast, raws) == decode_all(want, raws)
    assert fast.stats == want.stats
    assert any(isinstance(plan._typed, _Typed) for plan in fast._plans.values() if plan)
