"""`ds-triage stream` end to end, as a platform team runs it: real corpus logs in, JSON lines out
that match docs/schemas/stream.schema.json, the documented exit codes, nothing for chatter."""

import json
import os
import subprocess
import sys
import time

import pytest

from tests import stream_envelopes as env
from tests.test_probe_cli import _validator, errors

SCHEMA = _validator("stream.schema.json")
FAILURE = "zero3-saved-stage2-load-dp2"
CLEAN = sorted(p.stem for p in (env.CORPUS / "clean").glob("*.log"))[0]


def stream(cli, data: bytes, *args):
    proc = cli("stream", "-", "--summary", *args, stdin=data)
    lines = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    for line in lines:
        assert errors(SCHEMA, line) == [], line.get("kind")
    assert lines and lines[-1]["kind"] == "summary", proc.stderr.decode()
    return proc, [line for line in lines if line["kind"] == "incident"], lines[-1]


def test_a_failure_among_clean_chatter_is_one_incident_with_classifys_answer(cli):
    log = env.clean_lines(CLEAN) + env.case_lines(FAILURE) + env.clean_lines(CLEAN)
    proc, incidents, summary = stream(cli, "\n".join(log).encode())
    classified = json.loads(cli("classify", "-", "--json", stdin="\n".join(env.case_lines(FAILURE)).encode()).stdout)
    assert proc.returncode == 0
    assert [i["classification"]["category"] for i in incidents] == [classified["category"]]
    assert incidents[0]["classification"]["hypotheses"][0]["rule_id"] == classified["hypotheses"][0]["rule_id"]
    assert summary["lines"] == len(log) and summary["checkpoint_incidents"] == 1
    assert "1 incidents (1 checkpoint-loading)" in proc.stderr.decode()


def test_clean_training_output_prints_nothing_and_exits_1(cli):
    proc = cli("stream", "-", stdin="\n".join(env.clean_lines(CLEAN)).encode())
    assert proc.returncode == 1
    assert proc.stdout == b""
    assert "0 incidents" in proc.stderr.decode()


def test_interleaved_pods_each_get_their_own_incident_and_malformed_lines_are_counted(cli):
    """Two pods fail differently while a third chats; Fluent Bit records interleaved line by line,
    with broken JSON lines in between: each failure comes out once, under its pod's key."""
    pods = {"trainer-0": env.case_lines(FAILURE), "trainer-1": env.case_lines("zero2-dp2-optim-shard-deleted"),
            "trainer-2": env.clean_lines(CLEAN)}
    records = {pod: env.fluentbit(lines, pod) for pod, lines in pods.items()}
    out = []
    for i in range(max(map(len, records.values()))):
        for pod in pods:
            if i < len(records[pod]):
                out.append(json.dumps(records[pod][i]))
        if i % 50 == 7:
            out.append('{"log": "cut off mid-rec')
    proc, incidents, summary = stream(cli, "\n".join(out).encode(), "--decode-all")
    by_pod = {i["stream"].get("kubernetes.pod_name"): i for i in incidents}
    assert sorted(by_pod) == ["trainer-0", "trainer-1"], [i["stream"] for i in incidents]
    for pod in by_pod:
        alone = "\n".join(pods[pod]).encode()
        want = json.loads(cli("classify", "-", "--json", stdin=alone).stdout)["category"]
        assert by_pod[pod]["classification"]["category"] == want
        assert by_pod[pod]["time"]["first"].startswith("2026-12-02T21:05")
    assert summary["malformed"] == sum(1 for line in out if line.startswith('{"log": "cut off'))
    assert proc.returncode == 0


def test_input_ending_mid_traceback_still_gives_the_incident(cli):
    lines = env.case_lines(FAILURE)
    cut = next(i for i, line in enumerate(lines) if "Traceback (most recent call last)" in line) + 3
    proc, incidents, _ = stream(cli, "\n".join(lines[:cut]).encode())
    assert len(incidents) == 1
    assert incidents[0]["closed_by"] == "end-of-input"
    assert "Traceback (most recent call last)" in incidents[0]["excerpt"]["text"]


def test_an_incident_on_a_quiet_pipe_is_emitted_after_the_idle_timeout(rule_cache):
    """A live pipe that stays open: the incident must come out on --idle, not at end of input."""
    proc = subprocess.Popen([sys.executable, "-m", "triage", "stream", "-", "--idle", "0.5"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, XDG_CACHE_HOME=rule_cache))
    try:
        proc.stdin.write(("\n".join(env.case_lines(FAILURE)) + "\n").encode())
        proc.stdin.flush()
        start = time.monotonic()
        line = proc.stdout.readline()  # blocks until the incident is emitted, the pipe still open
        waited = time.monotonic() - start
        incident = json.loads(line)
        assert incident["kind"] == "incident" and incident["closed_by"] in ("idle", "summary")
        assert proc.poll() is None, "stream must keep reading after emitting"
        assert waited < 60
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == 0


@pytest.mark.parametrize("args, code, message", [
    (["/nonexistent/job.log"], 3, "no such file"),
    (["."], 3, "is a directory"),
    (["-", "--idle", "0"], 2, "must be positive"),
    (["-", "--key-fields", " , "], 2, "--key-fields"),
])
def test_bad_input_and_usage_are_one_line_and_the_documented_code(cli, args, code, message):
    proc = cli("stream", *args, stdin=b"")
    assert proc.returncode == code
    assert message in proc.stderr.decode()
    assert "Traceback" not in proc.stderr.decode()


def test_binary_garbage_is_not_fatal(cli):
    garbage = bytes(range(256)) * 4000 + b"\n" + "\n".join(env.case_lines(FAILURE)).encode()
    proc, incidents, summary = stream(cli, garbage)
    assert proc.returncode == 0 and len(incidents) == 1


def test_the_cli_lists_every_record_format_without_importing_the_decoder():
    from triage.cli import stream as cli_stream
    from triage.stream.records import FORMAT_NAMES

    assert cli_stream.FORMAT_NAMES == FORMAT_NAMES
