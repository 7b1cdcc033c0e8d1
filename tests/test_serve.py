"""`ds-triage serve` over real HTTP on loopback: the routes, what Fluent Bit's and Vector's HTTP
sinks send, the size limits and the 4xx answers. One server process for the module; every
request is bounded by a timeout and goes to 127.0.0.1 only."""

import gzip
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading

import pytest

from tests import stream_envelopes as env
from tests.test_probe_cli import _validator, errors

STREAM = _validator("stream.schema.json")
CLASSIFY = _validator("classify.schema.json")
FAILURE = "zero3-saved-stage2-load-dp2"
MAX_BODY = 1 << 20


class Server:
    def __init__(self, tmp):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "triage", "serve", "--port", "0", "--max-body", str(MAX_BODY), "--idle", "3600"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=dict(os.environ, XDG_CACHE_HOME=str(tmp)))
        line = self.proc.stderr.readline().decode()
        found = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        assert found, line
        self.port = int(found.group(1))
        # serve writes each incident to stdout as it closes: read it as it comes, or a full pipe
        # (64 KiB) blocks the server mid-request, as a shell pipeline's reader would not
        self.out = bytearray()
        self.reader = threading.Thread(target=self._read_stdout)
        self.reader.start()

    def _read_stdout(self):
        for chunk in iter(self.proc.stdout.read1, b""):
            self.out += chunk

    def request(self, method, path, body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, dict(response.getheaders()), json.loads(response.read())
        finally:
            conn.close()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        self.reader.join()
        err = self.proc.stderr.read()
        return self.proc.returncode, self.out.decode(), err.decode()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("serve"))
    yield s
    if s.proc.poll() is None:
        s.stop()


def test_healthz(server):
    status, _, body = server.request("GET", "/healthz")
    assert status == 200 and body["status"] == "ok" and body["rules"] > 50


def test_classify_text_and_json_give_what_the_cli_gives(server, cli):
    log = "\n".join(env.case_lines(FAILURE))
    want = json.loads(cli("classify", "-", "--json", stdin=log.encode()).stdout)
    for body, kind in ((log.encode(), "text/plain"), (json.dumps({"log": log}).encode(), "application/json")):
        status, _, got = server.request("POST", "/classify", body, {"Content-Type": kind})
        assert status == 200 and errors(CLASSIFY, got) == []
        assert got["category"] == want["category"]
        assert [h["rule_id"] for h in got["hypotheses"]] == [h["rule_id"] for h in want["hypotheses"]]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_data_binary_at_a_log_file_is_classified(server, cli, tmp_path):
    """`curl --data-binary @job.log URL/classify` sends curl's default form type: the log all the same
    (issue 44: it was a 415)."""
    log = tmp_path / "job.log"
    log.write_text("\n".join(env.case_lines(FAILURE)))
    want = json.loads(cli("classify", log, "--json").stdout)
    done = subprocess.run(["curl", "-sS", "--data-binary", f"@{log}", f"http://127.0.0.1:{server.port}/classify"],
                          capture_output=True, text=True, timeout=120)
    got = json.loads(done.stdout)
    assert done.returncode == 0 and errors(CLASSIFY, got) == []
    assert [h["rule_id"] for h in got["hypotheses"]] == [h["rule_id"] for h in want["hypotheses"]]


def test_fluent_bit_json_lines_batches_assemble_across_batches(server):
    """Fluent Bit's http output (format json_lines) sends a pod's lines in several batches; the
    incident that spans them comes out once, when it closes, with its pod as the stream."""
    records = env.fluentbit(env.clean_lines("resume-hf-z2-dp2-fp32"), "chatty-0")
    records += env.fluentbit(env.case_lines(FAILURE), "trainer-7")
    batches = [records[i:i + 40] for i in range(0, len(records), 40)]
    got = []
    for batch in batches:
        body = "\n".join(json.dumps(r) for r in batch).encode()
        status, _, result = server.request("POST", "/ingest", body, {"Content-Type": "application/x-ndjson"})
        assert status == 200, result
        assert result["records"] == len(batch) and result["malformed"] == 0
        got += result["incidents"]
    status, _, flushed = server.request("POST", "/flush")
    got += flushed["incidents"]
    assert len(got) == 1, [i["stream"] for i in got]
    incident = got[0]
    assert errors(STREAM, {k: v for k, v in incident.items() if k != "id"}) == []
    assert incident["stream"]["kubernetes.pod_name"] == "trainer-7"
    assert incident["classification"]["category"] == env.classified_as(FAILURE)
    status, _, listed = server.request("GET", f"/incidents?since={incident['id'] - 1}")
    assert status == 200 and [i["id"] for i in listed["incidents"]] == [incident["id"]]


def test_vector_gzip_json_array_batch(server):
    """Vector's http sink with `encoding.codec = "json"` and gzip compression sends a JSON array."""
    records = [{"message": line, "timestamp": env.rfc3339(i), "kubernetes": {"pod_name": "vec-0",
               "pod_namespace": "ml", "container_name": "trainer", "pod_node_name": "node-1"}}
               for i, line in enumerate(env.case_lines(FAILURE))]
    body = gzip.compress(json.dumps(records).encode())
    status, _, result = server.request("POST", "/ingest", body,
                                       {"Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert status == 200 and result["records"] == len(records)
    _, _, flushed = server.request("POST", "/flush")
    incidents = result["incidents"] + flushed["incidents"]
    assert [i["stream"].get("kubernetes.pod_name") for i in incidents] == ["vec-0"]


@pytest.mark.parametrize("method, path, body, headers, status, message", [
    ("GET", "/nope", None, {}, 404, "no route /nope"),
    ("GET", "/classify", None, {}, 405, "takes POST"),
    ("POST", "/classify", b"{not json", {"Content-Type": "application/json"}, 400, "not valid JSON"),
    ("POST", "/classify", b'{"text": "x"}', {"Content-Type": "application/json"}, 400, '"log"'),
    ("POST", "/classify", b"\x00\x01\x02" * 1000, {"Content-Type": "text/plain"}, 400, "does not look like a text log"),
    ("POST", "/ingest", b"x", {"Content-Type": "application/msgpack"}, 415, "format json_lines"),
    ("POST", "/ingest", b"[1, 2", {"Content-Type": "application/json"}, 400, "no log record"),
    ("POST", "/ingest", b"x", {"Content-Type": "text/plain", "Content-Encoding": "br"}, 415, "gzip is"),
    ("POST", "/ingest", b"not gzip", {"Content-Type": "text/plain", "Content-Encoding": "gzip"}, 400, "not valid gzip"),
    ("POST", "/classify", b"x" * (MAX_BODY + 1), {"Content-Type": "text/plain"}, 413, "over the limit"),
    ("POST", "/ingest", gzip.compress(b"a\n" * MAX_BODY), {"Content-Type": "text/plain", "Content-Encoding": "gzip"},
     413, "once decompressed"),
    ("GET", "/incidents?since=abc", None, {}, 400, "since must be an integer"),
])
def test_bad_requests_get_a_json_4xx(server, method, path, body, headers, status, message):
    got, response_headers, answer = server.request(method, path, body, headers)
    assert got == status, answer
    assert answer["status"] == status and message in answer["error"]
    if status == 405:
        assert response_headers["Allow"] == "POST"


def test_an_open_incident_is_written_to_stdout_at_shutdown(tmp_path):
    server = Server(tmp_path)
    try:
        lines = "\n".join(env.case_lines(FAILURE)[:-5]).encode()  # torchrun's closing rule not yet seen
        status, _, result = server.request("POST", "/ingest?stream=job-42", lines, {"Content-Type": "text/plain"})
        assert status == 200 and result["incidents"] == []
        _, _, health = server.request("GET", "/healthz")
        assert health["open_incidents"] == 1
    finally:
        code, out, err = server.stop()
    incidents = [json.loads(line) for line in out.splitlines()]
    assert len(incidents) == 1 and incidents[0]["classification"]["category"] == env.classified_as(FAILURE)
    assert code == 0 and "Traceback" not in err


def test_a_port_in_use_is_bad_input(server, cli):
    proc = cli("serve", "--port", server.port)
    assert proc.returncode == 3
    assert f"cannot listen on 127.0.0.1:{server.port}" in proc.stderr.decode() and b"Traceback" not in proc.stderr


def test_metrics_count_what_serve_did(server):
    """GET /metrics in the Prometheus text format, read back with prometheus_client's own parser:
    a classify, an incident through /ingest, a 404, each counted by its labels."""
    def scrape():
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        assert response.status == 200 and response.getheader("Content-Type").startswith("text/plain")
        text = response.read().decode()
        conn.close()
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for family in text_string_to_metric_families(text) for s in family.samples}

    def delta(name, **labels):
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0) - before.get(key, 0)

    from prometheus_client.parser import text_string_to_metric_families

    category = env.classified_as(FAILURE)
    lines = env.case_lines(FAILURE)
    before = scrape()
    server.request("POST", "/classify", "\n".join(lines).encode(), {"Content-Type": "text/plain"})
    body = "\n".join(json.dumps(r) for r in env.fluentbit(lines, "metrics-0")).encode()
    server.request("POST", "/ingest", body, {"Content-Type": "application/x-ndjson"})
    server.request("POST", "/flush")
    server.request("GET", "/no/such/route")
    after = scrape()
    assert delta("ds_triage_classified_total", category=category) == 1
    assert delta("ds_triage_incidents_total", category=category) == 1
    assert delta("ds_triage_records_total") == len(lines) and delta("ds_triage_malformed_total") == 0
    assert delta("ds_triage_requests_total", route="/classify", status="200") == 1
    assert delta("ds_triage_requests_total", route="other", status="404") == 1
    assert delta("ds_triage_request_seconds_count", route="/ingest") == 1
    assert after[("ds_triage_open_incidents", ())] == 0
