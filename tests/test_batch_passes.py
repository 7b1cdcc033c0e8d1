"""batch's two passes give `stream`'s incidents where they could go wrong, without Spark.

The executors' tasks (triage/batch/tasks.py) and the driver's plan (plan.py) run here in one
process, as spark.py wires them: the first pass over each file, then, for the streams that
may open an incident, their lines routed by literal and assembled. The inputs are real
corpus logs in Fluent Bit records, cut into files where it matters: a stream's context in one
file and its failure in the next, a pod whose literal stands in another pod's records, pods
named by numbers (no literal: every line decoded). tests/test_batch.py runs the same on Spark.
"""

import json

import pytest

from tests import stream_envelopes as env
from tests.conftest import ROOT
from tests.test_batch import CASES, same
from tests.test_stream_corpus import streamed
from triage.batch import plan, tasks
from triage.stream.limits import Limits
from triage.stream.prefilter import Prefilter
from triage.stream.records import Decoder

RULES = str(ROOT / "rules")


def passes(paths, fmt="fluentbit"):
    """(incidents, the second pass's plan) of batch over these files, in this order."""
    rows = [(f"file:{p}", None) for p in paths]
    setup = ((fmt, None, None), Limits(), RULES, (), None)
    items = list(tasks.first_pass(setup, rows))
    facts = plan.gather(item for item in items if item[0] != "incident")
    found = [item[1] for item in items if item[0] == "incident"]
    second = plan.second_pass(facts)
    if second:
        keys, literals, order, named = second
        routed: dict[int, list] = {}
        for index, part in tasks.route_pass(setup[0], (keys, literals, order), [r for r in rows if r[0] in named]):
            routed.setdefault(index, []).append(part)
        for item in routed.items():
            found.extend(tasks.stream_pass(setup, keys, item))
    return found, second


def stream(rules, lines: list[str]) -> list[dict]:
    """`ds-triage stream --format fluentbit` over the lines read as one input."""
    return streamed(rules, "".join(line + "\n" for line in lines).encode(), decoder=Decoder("fluentbit"))


def as_one_input(incidents, paths):
    """batch's (file, line in the file) back to stream's line over the files read as one."""
    before, count = {}, 0
    for path in paths:
        before[f"file:{path}"] = count
        count += path.read_bytes().count(b"\n")
    for incident in incidents:
        for end in ("first", "last"):
            incident["lines"][end] += before[incident["files"][end]]
        del incident["files"]
    return incidents


def write_files(tmp_path, lines: list[str], cuts: list[int]):
    paths, start = [], 0
    for n, cut in enumerate(cuts + [len(lines)]):
        path = tmp_path / f"2025-12-02T{21 + n:02d}.jsonl"
        path.write_text("".join(line + "\n" for line in lines[start:cut]))
        paths.append(path)
        start = cut
    return paths


def records(streams: dict[str, list[str]], extra=None, kubernetes=None) -> list[str]:
    """Fluent Bit records of each pod's lines, the pods interleaved a line each; `extra`: more
    fields of a pod's records, `kubernetes`: other values of every record's kubernetes fields."""
    out = []
    for pod, lines in streams.items():
        recs = env.fluentbit(lines, pod)
        for rec in recs:
            rec.update((extra or {}).get(pod, {}))
            rec["kubernetes"].update(kubernetes or {})
        out.append([json.dumps(rec) for rec in recs])
    return env.interleave(out)


@pytest.mark.parametrize("case", CASES)
def test_the_context_in_one_file_and_the_failure_in_the_next(rules, tmp_path, case):
    lines = env.case_lines(case)
    prefilter = Prefilter(rules.rules)
    trigger = next(n for n, line in enumerate(lines) if prefilter.is_trigger(line))
    both = records({"trainer-0": lines, "trainer-1": env.clean_lines(sorted(env.CORPUS.glob("clean/*.log"))[0].stem)})
    cut = 2 * trigger  # the records interleave two pods: the failing pod's lines before its first trigger
    paths = write_files(tmp_path, both, [cut])
    want = stream(rules, both)
    got, second = passes(paths)
    assert want and same(as_one_input(got, paths)) == same(want)
    keys, literals, _, _ = second
    assert [dict(k)["kubernetes.pod_name"] for k in keys] == ["trainer-0"] and literals == [b'"trainer-0"']


def test_a_pod_named_in_another_pods_records_keeps_its_own(rules, tmp_path):
    """trainer-2's records carry trainer-1's name: they reach trainer-1's assembler, which drops them."""
    streams = {"trainer-1": env.case_lines(CASES[1]), "trainer-2": env.case_lines(CASES[2])}
    both = records(streams, extra={"trainer-2": {"peer": "trainer-1"}})
    paths = write_files(tmp_path, both, [len(both) // 3, 2 * len(both) // 3])
    want = stream(rules, both)
    got, second = passes(paths)
    assert len(want) == 2 and same(as_one_input(got, paths)) == same(want)
    assert second[1] == [b'"trainer-1"', b'"trainer-2"']


def test_streams_named_by_numbers_have_no_literal_and_every_line_is_decoded(rules, tmp_path):
    """A number stands unquoted in a record, so no name of these streams can be searched for."""
    streams = {"1001": env.case_lines(CASES[3]), "1002": env.case_lines(CASES[4]), "1003": env.clean_lines(
        sorted(env.CORPUS.glob("clean/*.log"))[1].stem)}
    both = records(streams, kubernetes={"namespace_name": "42", "container_name": "0", "host": "7"})
    paths = write_files(tmp_path, both, [len(both) // 2])
    want = stream(rules, both)
    got, second = passes(paths)
    assert len(want) == 2 and same(as_one_input(got, paths)) == same(want)
    assert second[1] == [None, None]


def test_plain_files_never_reach_the_second_pass(rules, tmp_path):
    path = tmp_path / "job.log"
    path.write_text("\n".join(env.case_lines(CASES[0])) + "\n")
    got, second = passes([path], fmt="auto")
    want = streamed(rules, path.read_bytes())
    assert second is None and len(got) == len(want) == 1
    assert got[0]["stream"] == {"file": f"file:{path}"} and got[0]["lines"] == want[0]["lines"]
