"""`ds-triage serve` under load and hostile requests, over real HTTP on loopback: a fleet's
worth of clients at once, a classification that would run for a minute, gzip that is cut or
followed by junk, JSON nested 100,000 deep. Log text is real corpus text; the slow request
comes from a test-only copy of the rules whose DS-F001 line pattern backtracks."""

import gzip
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests import stream_envelopes as env

ROOT = Path(__file__).resolve().parents[1]
FAILURE = "zero3-saved-stage2-load-dp2"
# DS-F001's third pattern: a bare AssertionError, then a line condition. Swapped for a
# backtracking regex, it runs for minutes on the line of 'a's below (2^n paths).
SLOW_FROM = r"line: '^[ \t]*assert len\(self\.ckpt_list\) > 0[ \t]*$'"
SLOW_TO = r"line: '^stall (a|aa)+$'"
SLOW_LOG = ("stall " + "a" * 44 + "b\n" + "Traceback (most recent call last):\n"
            '  File "load.py", line 1, in <module>\n    main()\nAssertionError\n')


class Serve:
    def __init__(self, tmp, *args, env=None):
        self.proc = subprocess.Popen([sys.executable, "-m", "triage", "serve", "--port", "0", "--idle", "3600", *args],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     env=dict(os.environ, XDG_CACHE_HOME=str(tmp), **(env or {})))
        line = self.proc.stderr.readline().decode()
        found = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        assert found, line
        self.port = int(found.group(1))
        # the rest of stderr (one line per request) must not fill the pipe and stall the server
        self.err: list[bytes] = []
        self._reader = threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True)
        self._reader.start()

    def request(self, method, path, body=None, headers=None, timeout=120):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, json.loads(response.read())
        finally:
            conn.close()

    def stop(self) -> str:
        """Its stderr, once it has exited."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        self._reader.join(10)
        return b"".join(self.err).decode()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Serve(tmp_path_factory.mktemp("serve-load"))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory):
    """A server whose rules hold one backtracking regex, with a 3 s budget and one worker."""
    tmp = tmp_path_factory.mktemp("serve-slow")
    repo = tmp / "repo"  # rule examples are named from the repository root: keep the layout
    shutil.copytree(ROOT / "rules", repo / "rules")
    (repo / "corpus").symlink_to(ROOT / "corpus")
    rule = next((repo / "rules" / "missing_file").glob("DS-F001-*.yaml"))
    text = rule.read_text()
    assert SLOW_FROM in text
    rule.write_text(text.replace(SLOW_FROM, SLOW_TO))
    # on Python's re: RE2, which classify uses when it can, runs even this pattern in linear time
    s = Serve(tmp, "--rules", str(repo / "rules"), "--workers", "1", "--budget", "3", env={"DS_TRIAGE_REGEX_ENGINE": "re"})
    yield s
    s.stop()


def test_two_hundred_concurrent_clients_get_no_connection_reset(server):
    log = "\n".join(env.case_lines(FAILURE)).encode()
    clients = 200
    start = threading.Barrier(clients)
    results, failures = [], []

    def client():
        start.wait()
        try:
            results.append(server.request("POST", "/classify", log, {"Content-Type": "text/plain"}, timeout=300)[0])
        except OSError as exc:  # ConnectionResetError, BrokenPipeError, refused
            failures.append(repr(exc))

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(400)
    assert failures == []
    assert results == [200] * clients


def test_healthz_answers_while_a_slow_classification_runs(slow_server):
    answer = {}

    def slow():
        t0 = time.monotonic()
        answer["status"], answer["body"] = slow_server.request("POST", "/classify", SLOW_LOG.encode(),
                                                               {"Content-Type": "text/plain"})
        answer["seconds"] = time.monotonic() - t0

    worker = threading.Thread(target=slow)
    worker.start()
    time.sleep(0.5)  # the slow request is in its worker by now
    latencies = []
    while worker.is_alive() and len(latencies) < 100:
        t0 = time.monotonic()
        status, body = slow_server.request("GET", "/healthz", timeout=10)
        latencies.append(time.monotonic() - t0)
        assert status == 200 and body["status"] == "ok"
        time.sleep(0.02)
    worker.join(60)
    latencies.sort()
    print(f"\nhealthz during a slow classify: {len(latencies)} requests, median {latencies[len(latencies) // 2] * 1000:.1f} ms,"
          f" max {latencies[-1] * 1000:.1f} ms; the slow request answered {answer['status']} after {answer['seconds']:.1f} s")
    assert len(latencies) >= 5
    # 100 ms is the goal (measured ~2-10 ms); the margin is for a busy shared 2-core machine
    assert latencies[len(latencies) // 2] < 0.1 and latencies[-1] < 1.0
    assert answer["status"] == 503 and "budget of 3 s" in answer["body"]["error"]
    assert answer["seconds"] < 20  # 3 s budget, not the minutes the regex would take
    # the worker was replaced: the next request is classified
    status, body = slow_server.request("POST", "/classify", "\n".join(env.case_lines(FAILURE)).encode(),
                                       {"Content-Type": "text/plain"})
    assert status == 200 and body["category"] != "unknown"


def test_truncated_gzip_is_400(server):
    whole = gzip.compress("\n".join(env.case_lines(FAILURE)).encode())
    status, body = server.request("POST", "/classify", whole[: len(whole) // 2],
                                  {"Content-Type": "text/plain", "Content-Encoding": "gzip"})
    assert status == 400 and "truncated" in body["error"]
    # only the 8-byte trailer (CRC and length) cut: the text is all there, but unchecked
    status, body = server.request("POST", "/classify", whole[:-8],
                                  {"Content-Type": "text/plain", "Content-Encoding": "gzip"})
    assert status == 400 and "truncated" in body["error"]


def test_gzip_with_trailing_garbage_is_400(server):
    whole = gzip.compress("\n".join(env.case_lines(FAILURE)).encode())
    for path, kind in (("/classify", "text/plain"), ("/ingest", "application/x-ndjson")):
        status, body = server.request("POST", path, whole + b"\x00garbage",
                                      {"Content-Type": kind, "Content-Encoding": "gzip"})
        assert status == 400 and "not gzip" in body["error"], (path, body)


def test_two_gzip_members_are_one_body(server):
    lines = env.case_lines(FAILURE)
    half = len(lines) // 2
    body = gzip.compress(("\n".join(lines[:half]) + "\n").encode()) + gzip.compress("\n".join(lines[half:]).encode())
    status, got = server.request("POST", "/classify", body, {"Content-Type": "text/plain", "Content-Encoding": "gzip"})
    _, whole = server.request("POST", "/classify", "\n".join(lines).encode(), {"Content-Type": "text/plain"})
    assert status == 200 and got["category"] == whole["category"] != "unknown"


@pytest.mark.parametrize("path", ["/classify", "/ingest"])
def test_deep_json_is_400(server, path):
    deep = b"[" * 100_000 + b"]" * 100_000
    status, body = server.request("POST", path, deep, {"Content-Type": "application/json"})
    assert status == 400 and "nested too deeply" in body["error"]
    status, _ = server.request("GET", "/healthz")
    assert status == 200


def test_connections_are_not_reset_at_the_socket_level(server):
    """1,000 connections opened at once, before any is served: the backlog holds them."""
    socks = []
    try:
        for _ in range(1000):
            socks.append(socket.create_connection(("127.0.0.1", server.port), timeout=60))
        for s in socks:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        for s in socks:
            assert s.recv(64).startswith(b"HTTP/1.1 200")
    finally:
        for s in socks:
            s.close()


def test_healthz_answers_while_a_long_ingest_holds_the_assembler(server):
    """An /ingest batch of 150 pods' real failure logs takes seconds to assemble and classify under
    the assembler's lock; /healthz, which reports the open incidents, must not wait for it."""
    lines = env.case_lines(FAILURE)
    body = "\n".join(json.dumps(r) for pod in range(150) for r in env.fluentbit(lines, f"fleet-{pod}")).encode()
    done = {}

    def ingest():
        done["status"], done["body"] = server.request("POST", "/ingest", body,
                                                      {"Content-Type": "application/x-ndjson"}, timeout=600)

    worker = threading.Thread(target=ingest)
    worker.start()
    time.sleep(0.3)
    during = []
    while worker.is_alive():
        t0 = time.monotonic()
        status, health = server.request("GET", "/healthz", timeout=10)
        if worker.is_alive():
            during.append(time.monotonic() - t0)
        assert status == 200 and health["status"] == "ok"
        time.sleep(0.05)
    worker.join()
    during.sort()
    print(f"\nhealthz during a 150-pod ingest: {len(during)} answers, "
          f"median {during[len(during) // 2] * 1000 if during else 0:.1f} ms")
    assert done["status"] == 200 and done["body"]["records"] == 150 * len(lines)
    assert len(during) >= 3  # answered while the batch was still being assembled, not after it
