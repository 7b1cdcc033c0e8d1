"""Incident assembly: each incident once, whatever the input does; bounded memory."""

import json

from tests import stream_envelopes as env
from triage.stream.assemble import Limits
from triage.stream.pipeline import StreamTriage
from triage.stream.records import Decoder

ZERO3 = env.case_lines("zero3-saved-stage2-load-dp2")  # rank 1's traceback, rank 0's, torchrun's box
ZERO3_CATEGORY = env.classified_as("zero3-saved-stage2-load-dp2")
CHAINED = env.case_lines("ds_to_universal-zero2-dp2-missing-shard")  # "The above exception was the direct cause"
CHATTER = env.clean_lines("train-long-z2-dp2-fp32")


def run(rules, data: bytes, *, chunk: int = 0, limits: Limits | None = None, decoder=None, ticks=()):
    out = []
    triage = StreamTriage(rules, out.append, limits=limits, decoder=decoder)
    pieces = [data[i:i + chunk] for i in range(0, len(data), chunk)] if chunk else [data]
    for n, piece in enumerate(pieces):
        triage.feed(piece, float(n))
    for now in ticks:
        triage.tick(now)
    triage.finish(float(len(pieces)))
    return out, triage


def text(lines) -> bytes:
    return ("\n".join(lines) + "\n").encode()


def test_one_job_failure_is_one_incident_closed_by_torchruns_summary(rules):
    (incident,), _ = run(rules, text(ZERO3))
    assert incident["closed_by"] == "summary"
    assert incident["classification"]["category"] == ZERO3_CATEGORY
    chains = incident["classification"]["incident"]["chains"]
    assert any(c["ranks"] == [0, 1] for c in chains)  # both ranks' tracebacks in one incident


def test_chained_exceptions_stay_together(rules):
    (incident,), _ = run(rules, text(CHAINED))
    links = [e["link"] for c in incident["classification"]["incident"]["chains"] for e in c["exceptions"]]
    assert "cause" in links


def test_every_byte_boundary_gives_the_same_incident(rules):
    whole, _ = run(rules, text(ZERO3))
    for chunk in (1, 7, 4096):
        pieces, _ = run(rules, text(ZERO3), chunk=chunk)
        assert [i["excerpt"]["text"] for i in pieces] == [i["excerpt"]["text"] for i in whole]


def test_input_ending_mid_traceback_still_emits_it_once(rules):
    cut = next(i for i, line in enumerate(ZERO3) if "state_dict_factory.py" in line) + 1
    data = text(ZERO3[:cut])[:-1]  # and no final newline
    out, triage = run(rules, data)
    assert len(out) == 1 and out[0]["closed_by"] == "end-of-input"
    assert out[0]["lines"]["last"] == cut
    assert triage.summary()["incidents"] == 1


def test_gap_and_idle_close_an_incident_and_chatter_yields_nothing(rules):
    data = text(ZERO3[:60] + CHATTER[200:700])  # rank 1's traceback, then healthy training
    out, _ = run(rules, data, limits=Limits(gap=100))
    assert [i["closed_by"] for i in out] == ["gap"]
    assert out[0]["lines"]["last"] - out[0]["lines"]["first"] < 160
    out, _ = run(rules, text(ZERO3[:60]), limits=Limits(idle=5.0), ticks=[100.0])
    assert [i["closed_by"] for i in out] == ["idle"]
    assert run(rules, text(CHATTER))[0] == []


def test_a_huge_incident_keeps_head_and_tail_and_says_so(rules):
    frames = [line for line in ZERO3 if line.startswith("[rank1]:  ")]
    lines = ZERO3[:27] + [ZERO3[26]] + frames * 200 + ZERO3[27:]
    (incident,), _ = run(rules, text(lines), limits=Limits(max_lines=300))
    excerpt = incident["excerpt"]
    assert excerpt["truncated"] and excerpt["omitted_lines"] > 0
    assert excerpt["lines"] <= 300 + 1 + excerpt["context_lines"]
    assert "lines omitted]" in excerpt["text"] and excerpt["text"].rstrip().endswith("=" * 60)
    assert incident["classification"]["incident"]["truncated"] is True
    assert incident["lines"]["count"] == len(lines) - 26  # every line counted, kept or not


def test_a_line_over_the_limit_is_cut_not_lost(rules):
    long_line = ZERO3[48] + " " + "x" * 200_000  # the AssertionError line, padded
    (incident,), _ = run(rules, text(ZERO3[:48] + [long_line] + ZERO3[49:]), limits=Limits(max_line=5000))
    assert incident["excerpt"]["cut_lines"] == 1 and "characters cut]" in incident["excerpt"]["text"]


def _pods(n: int) -> bytes:
    """n pods, each printing rank 1's traceback, interleaved; none ever ends."""
    streams = [[json.dumps(r) for r in env.fluentbit(ZERO3[26:50], f"trainer-{i}")] for i in range(n)]
    return text(env.interleave(streams))


def test_too_many_open_incidents_are_emitted_early_never_dropped(rules):
    out, triage = run(rules, _pods(12))
    assert len(out) == 12 and not triage.summary()["evicted"]
    most_open = []
    out = []
    triage = StreamTriage(rules, lambda i: (out.append(i), most_open.append(len(triage.assembler.open))),
                          limits=Limits(max_open=4))
    triage.feed(_pods(12), 0.0)
    triage.finish(0.0)
    # 12 pods failing at once with room for 4: each pod's incident is emitted early (its
    # traceback header, then its exception line apart), none is lost, memory stays bounded.
    assert {i["stream"]["kubernetes.pod_name"] for i in out} == {f"trainer-{i}" for i in range(12)}
    assert all(any("Traceback" in i["excerpt"]["text"] and i["stream"]["kubernetes.pod_name"] == f"trainer-{n}"
                   for i in out) for n in range(12))
    assert max(most_open) <= 4
    assert sum(i["closed_by"] == "evicted" for i in out) == triage.summary()["evicted"] > 0


def test_too_many_streams_forget_the_oldest_after_emitting_it(rules):
    out, triage = run(rules, _pods(12), limits=Limits(max_streams=3))
    assert {i["stream"]["kubernetes.pod_name"] for i in out} == {f"trainer-{i}" for i in range(12)}
    assert len(triage.assembler.streams) <= 3


def test_one_pod_after_another_evicts_only_finished_incidents(rules):
    streams = [[json.dumps(r) for r in env.fluentbit(ZERO3[26:50], f"trainer-{i}")] for i in range(12)]
    out, triage = run(rules, text([line for s in streams for line in s]), limits=Limits(max_open=4))
    assert len(out) == 12 and triage.summary()["evicted"] == 8  # the stalest go first: those that are done
    assert all(i["lines"]["count"] == 24 and i["classification"]["category"] == ZERO3_CATEGORY for i in out)


def test_context_is_per_stream_and_per_run(rules):
    """A pipeline job's topology line is context for its own failure only: not for another
    pod's, and not for the next run in the same stream."""
    pp2 = env.case_lines("pp2-saved-load-pp1")  # needs its `RANK=0 STAGE=0 LAYERS=9` line
    other = env.case_lines("zero2-dp2-optim-shard-truncated")
    alone = run(rules, text(pp2))[0][0]["classification"]["hypotheses"][0]["rule_id"]
    assert alone == "DS-P003"
    (first, second), _ = run(rules, text(pp2 + other))
    assert first["classification"]["hypotheses"][0]["rule_id"] == "DS-P003"
    assert "LAYERS=" not in second["excerpt"]["text"]
    solo = run(rules, text(other))[0][0]
    assert second["classification"]["category"] == solo["classification"]["category"]


def test_partial_cri_lines_are_joined_before_classifying(rules):
    lines = ZERO3
    raws = []
    for i, line in enumerate(lines):
        if "Traceback" in line:  # the runtime split this one
            raws += [f"{env.rfc3339(i)} stderr P {line[:12]}", f"{env.rfc3339(i)} stderr F {line[12:]}"]
        else:
            raws.append(f"{env.rfc3339(i)} stderr F {line}")
    (incident,), _ = run(rules, text(raws))
    assert incident["classification"]["category"] == ZERO3_CATEGORY
    assert "[rank1]: Traceback (most recent call last):" in incident["excerpt"]["text"]


def test_decode_all_counts_every_malformed_line(rules):
    raws = [json.dumps(r) for r in env.fluentbit(CHATTER[:300], "trainer-0")]
    raws[10] = raws[10][:40]  # cut records inside chatter
    raws[200] = raws[200][:55]
    data = text(raws)
    _, skipping = run(rules, data)
    out = []
    exact = StreamTriage(rules, out.append, decode_all=True)
    exact.feed(data, 0.0)
    exact.finish(0.0)
    assert exact.summary()["malformed"] == 2
    assert skipping.summary()["malformed"] <= 2  # chatter lines are not decoded without --decode-all
    assert skipping.summary()["lines"] == exact.summary()["lines"] == 300


def test_a_restarts_config_dump_does_not_keep_an_incident_open(rules):
    """A job that restarts prints DeepSpeed's config dump again: its indented lines are not the
    incident's continuation, so an incident with no torchrun summary still closes on `gap`, and a
    second failure after the restarts is an incident of its own."""
    restart = env.clean_lines("resume-z2-dp2-fp32")  # a whole real run: config dump, training, saving
    assert sum(line.startswith("    ") for line in restart) > 20
    limits = Limits(gap=200)
    data = text(CHAINED + restart * 6 + CHAINED)
    incidents, _ = run(rules, data, limits=limits)
    assert [i["closed_by"] for i in incidents] == ["gap", "end-of-input"]
    assert all(i["lines"]["count"] < len(CHAINED) + limits.gap + 50 for i in incidents)
