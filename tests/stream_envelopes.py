"""Real corpus log lines in the envelopes log shippers and stores put them in.

The envelopes follow each tool's documentation (see triage/stream/records.py); the log text
inside is always a real corpus log, never invented.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
T0 = dt.datetime(2026, 12, 2, 21, 5, 50, tzinfo=dt.timezone.utc)


def case_lines(name: str) -> list[str]:
    return (CORPUS / "cases" / f"{name}.log").read_text(encoding="utf-8", errors="replace").splitlines()


def classified_as(name: str) -> str:
    """The category `classify` gives the whole case log: what a stream's incident must agree with."""
    from tests.session import session_rules
    from triage.classify.classifier import classify

    category = classify("\n".join(case_lines(name)) + "\n", rules=session_rules()).category
    assert category != "unknown", name  # a failure the rules recognise, or the comparison proves nothing
    return category


def clean_lines(name: str) -> list[str]:
    return (CORPUS / "clean" / f"{name}.log").read_text(encoding="utf-8", errors="replace").splitlines()


def rfc3339(i: int) -> str:
    t = T0 + dt.timedelta(milliseconds=i)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond:06d}000Z"


def nanos(i: int) -> str:
    return str(int(T0.timestamp()) * 10**9 + i * 10**6)


def docker(lines: list[str]) -> list[str]:
    return [json.dumps({"log": line + "\n", "stream": "stderr", "time": rfc3339(i)}) for i, line in enumerate(lines)]


def cri(lines: list[str]) -> list[str]:
    return [f"{rfc3339(i)} stderr F {line}" for i, line in enumerate(lines)]


def fluentbit(lines: list[str], pod: str, start: int = 0) -> list[dict]:
    return [{"date": T0.timestamp() + (start + i) / 1000, "log": line + "\n", "stream": "stderr",
             "time": rfc3339(start + i),
             "kubernetes": {"pod_name": pod, "namespace_name": "ml-train", "pod_id": "c759a5f5-9117-8a1dc0b1f907",
                            "host": "gpu-node-3", "container_name": "trainer", "docker_id": "2accb2c4e1",
                            "container_image": "nvcr.io/nvidia/pytorch:24.05-py3"}}
            for i, line in enumerate(lines)]


def vector(lines: list[str], pod: str, start: int = 0) -> list[dict]:
    return [{"file": f"/var/log/pods/ml-train_{pod}_93bde4d0/trainer/0.log", "message": line,
             "source_type": "kubernetes_logs", "stream": "stderr", "timestamp": rfc3339(start + i),
             "kubernetes": {"container_name": "trainer", "pod_name": pod, "pod_namespace": "ml-train",
                            "pod_node_name": "gpu-node-3", "pod_uid": "93bde4d0-9731-4785-a80e-cd27ba8ad7c2",
                            "pod_labels": {"app.kubernetes.io/name": "trainer", "job-name": "resume-7b"}}}
            for i, line in enumerate(lines)]


def logcli(lines: list[str], pod: str) -> list[str]:
    labels = {"namespace": "ml-train", "pod": pod, "container": "trainer", "job": "ml-train/trainer"}
    return [json.dumps({"labels": labels, "line": line, "timestamp": rfc3339(i)}) for i, line in enumerate(lines)]


def loki_query_range(streams: dict[str, list[str]]) -> str:
    """One query_range answer; Loki's default direction=backward lists newest first."""
    result = [{"stream": {"namespace": "ml-train", "pod": pod, "container": "trainer"},
               "values": [[nanos(i), line] for i, line in reversed(list(enumerate(lines)))]}
              for pod, lines in streams.items()]
    return json.dumps({"status": "success", "data": {"resultType": "streams", "result": result,
                                                     "stats": {"summary": {"totalLinesProcessed": 0}}}})


def es_source(line: str, pod: str, i: int) -> dict:
    # ECS, as Filebeat's kubernetes metadata writes it
    return {"@timestamp": rfc3339(i), "message": line, "log": {"offset": i * 100, "file": {"path": "/var/log/containers/x.log"}},
            "kubernetes": {"pod": {"name": pod, "uid": "93bde4d0"}, "namespace": "ml-train", "container": {"name": "trainer"}},
            "host": {"name": "gpu-node-3"}}


def es_hits(lines: list[str], pod: str) -> list[str]:
    return [json.dumps({"_index": "filebeat-2026.12.02", "_id": f"id{i}", "_score": None,
                        "_source": es_source(line, pod, i)}) for i, line in enumerate(lines)]


def es_bulk(lines: list[str], pod: str) -> list[str]:
    out = []
    for i, line in enumerate(lines):
        out.append(json.dumps({"index": {"_index": "filebeat-2026.12.02", "_id": f"id{i}"}}))
        out.append(json.dumps(es_source(line, pod, i)))
    return out


def es_search(lines: list[str], pod: str) -> str:
    hits = [{"_index": "filebeat-2026.12.02", "_id": f"id{i}", "_source": es_source(line, pod, i)}
            for i, line in enumerate(lines)]
    return json.dumps({"took": 12, "timed_out": False, "hits": {"total": {"value": len(hits)}, "hits": hits}})


def interleave(streams: list[list]) -> list:
    """Round-robin: the lines of many streams arriving mixed, each stream in its own order."""
    out, queues = [], [list(s) for s in streams]
    while any(queues):
        for queue in queues:
            if queue:
                out.append(queue.pop(0))
    return out
