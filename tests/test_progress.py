"""Progress on stderr: on a terminal, absent when piped, present piped with --progress, absent
under -q; never on stdout, never on classify's path (its cold start), and Ctrl-C still sums up a
stream. Each command runs as a user runs it, its stderr on a real pseudo-terminal."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from triage.kb.source import load_yaml

from tests import probe_checkpoints as pc
from tests import terminal
from tests.conftest import CORPUS, ROOT

FAILURE_LOG = CORPUS / "cases" / "job-zero3-train-then-stage2-load.log"
# terminal or piped, the options, whether progress shows
WHEN = [(True, [], True), (False, [], False), (False, ["--progress"], True), (True, ["-q"], False),
        (True, ["--progress", "-q"], False)]
WHEN_IDS = ["terminal", "piped", "piped --progress", "terminal -q", "terminal --progress -q"]


@pytest.mark.slow
@pytest.mark.parametrize("on_terminal, options, shown", WHEN, ids=WHEN_IDS)
def test_manifest_shows_the_bytes_hashed(on_terminal, options, shown):
    root = pc.copy_of(pc.HEALTHY, f"progress-{len(options)}-{on_terminal}")
    run = terminal.run("manifest", root, *options, terminal=on_terminal)
    assert run.code == 0, run.stderr
    assert run.stdout == f"wrote {root / 'global_step3' / 'ds-triage-manifest.json'}\n"  # stdout: the result only
    size = sum(p.stat().st_size for p in (root / "global_step3").glob("*.pt"))
    assert ("hashing global_step3" in run.stderr) is shown
    if shown:
        assert "100%" in run.stderr and "file 3/3" in run.stderr and "B/s" in run.stderr
        from tqdm import tqdm

        assert f"/{tqdm.format_sizeof(size, divisor=1024)}" in run.stderr  # the total, in binary units
    assert ("hashed 3 file(s)" in run.stderr) is ("-q" not in options)  # -q: nothing but errors
    if "-q" in options:
        assert run.stderr == ""


@pytest.mark.slow
@pytest.mark.parametrize("on_terminal, options, shown", WHEN[:4], ids=WHEN_IDS[:4])
def test_verify_deep_shows_the_crc_and_the_manifest_hashing(on_terminal, options, shown):
    root = pc.copy_of(pc.HEALTHY, "verify-progress")
    assert terminal.run("manifest", root, "-q").code == 0
    run = terminal.run("verify", root, "--deep", *options, terminal=on_terminal)
    assert run.code == 0 and run.stdout.endswith("verdict: healthy\n"), run.stderr
    for meter in ("integrity: CRC-32 of 3 shard(s)", "sha256 of global_step3"):
        assert (meter in run.stderr) is shown, run.stderr
    if shown:
        assert "shard 3/3" in run.stderr and "file 3/3" in run.stderr and "100%" in run.stderr


@pytest.mark.slow
def test_probe_meters_only_the_work_that_reads_every_byte():
    root = pc.scenario(pc.HEALTHY)
    deep = terminal.run("probe", root, "--deep")
    assert deep.code == 0 and "integrity: CRC-32 of 3 shard(s)" in deep.stderr and "100%" in deep.stderr
    quick = terminal.run("probe", root)
    assert quick.code == 0 and quick.stderr == ""  # the cheap probes read a few KB: no meter
    # the same report, but for what only --deep does: the CRC-32s and the consistency probe's row
    deep_only = "".join(line for line in deep.stdout.splitlines(True) if not line.lstrip().startswith("consistency "))
    assert "consistency " in deep.stdout
    assert quick.stdout == deep_only.replace("every record's CRC-32 verified", "(--deep also checks every CRC-32)")


@pytest.fixture(scope="module")
def some_cases(tmp_path_factory):
    """A corpus dir of real cases of each kind: what the meter counts, not the whole corpus's
    scores (tests/test_eval.py has those)."""
    from tests.test_eval_pastes import small_corpus

    return small_corpus(tmp_path_factory.mktemp("corpus"), per_kind=12)


@pytest.mark.parametrize("on_terminal, options, shown", WHEN[:4], ids=WHEN_IDS[:4])
def test_eval_counts_the_logs_classified(on_terminal, options, shown, rule_cache, some_cases):
    run = terminal.run("eval", some_cases, *options, terminal=on_terminal, env={"XDG_CACHE_HOME": rule_cache})
    count = sum(1 for case in load_yaml((some_cases / "manifest.yaml").read_text()) if case.get("log"))
    assert count == 36
    assert run.code in (0, 1) and run.stdout.startswith("corpus "), run.stderr
    assert (f"eval: logs classified: 100%" in run.stderr) is shown
    if shown:
        assert f"{count}/{count}" in run.stderr and "top-1 so far" in run.stderr


@pytest.mark.parametrize("on_terminal, options, shown", WHEN[:4], ids=WHEN_IDS[:4])
def test_stream_from_a_file_counts_lines_and_incidents(on_terminal, options, shown, rule_cache):
    run = terminal.run("stream", FAILURE_LOG, *options, terminal=on_terminal, env={"XDG_CACHE_HOME": rule_cache})
    assert run.code == 0 and json.loads(run.stdout)["classification"]["category"] == "zero_stage_mismatch"
    assert ("stream: 100%" in run.stderr) is shown, run.stderr
    if shown:
        lines = len(FAILURE_LOG.read_bytes().splitlines())
        assert f"{lines:,} lines, 1 incidents, 1 checkpoint-loading" in run.stderr
    assert ("ds-triage stream: " in run.stderr) is ("-q" not in options)


def test_ctrl_c_on_a_stream_still_emits_what_was_read_and_its_summary(tmp_path):
    """A file that never ends (a FIFO a writer keeps open): Ctrl-C closes the open incident, emits it,
    and prints the summary of what was read; exit 130."""
    fifo = tmp_path / "job.log"
    os.mkfifo(fifo)
    whole = FAILURE_LOG.read_bytes()
    # a second failure whose window is still open at Ctrl-C: a traceback, no launcher summary after it
    cut = whole[:whole.index(b"AssertionError\n", whole.index(b"[rank0]: Traceback")) + len(b"AssertionError\n")]
    second = b"\n".join(line for line in cut.splitlines() if line.startswith(b"[rank0]:")) + b"\n"
    proc = subprocess.Popen([sys.executable, "-m", "triage", "stream", str(fifo), "--summary", "--idle", "3600"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                            env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache")))
    try:
        with open(fifo, "wb") as writer:
            writer.write(whole)
            writer.flush()
            first = json.loads(proc.stdout.readline())  # closed by torchrun's summary box: out at once
            assert first["kind"] == "incident" and first["closed_by"] == "summary"
            writer.write(second)
            writer.flush()
            time.sleep(2)  # read, and held open: no end of input, no idle deadline for an hour
            assert proc.poll() is None
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = [json.loads(line) for line in out.decode().splitlines()]
    assert proc.returncode == 130, err.decode()
    assert [line["kind"] for line in lines] == ["incident", "summary"]  # after the first, read before
    assert lines[0]["closed_by"] == "end-of-input" and lines[0]["classification"]["category"] != "unknown"
    summary = lines[-1]
    assert summary["interrupted"] is True and summary["incidents"] == 2
    assert summary["lines"] == len(whole.splitlines()) + len(second.splitlines())
    assert "ds-triage stream: interrupted (Ctrl-C) after " in err.decode()
    assert "Traceback" not in err.decode()


def test_classify_never_imports_the_progress_library(tmp_path):
    """classify's cold start pays for no meter: neither tqdm nor triage.progress is imported."""
    probe = ("import sys, triage.cli as c; c.main(['classify', sys.argv[1]]); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'tqdm' or m == 'triage.progress'), "
             "file=sys.stderr)")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    for on_terminal in (False, True):
        controller, err = os.openpty() if on_terminal else (None, subprocess.PIPE)
        proc = subprocess.run([sys.executable, "-c", probe, str(FAILURE_LOG)], stdout=subprocess.PIPE, stderr=err,
                              env=env, cwd=ROOT, timeout=120)
        if on_terminal:
            os.close(err)
            text = ""
            while True:
                try:
                    piece = os.read(controller, 1 << 16)
                except OSError:  # EIO: the terminal's other end is closed
                    break
                if not piece:
                    break
                text += piece.decode()
            os.close(controller)
        else:
            text = proc.stderr.decode()
        assert proc.returncode == 0 and text.strip().splitlines()[-1] == "[]", text


@pytest.mark.parametrize("command", [["probe", "CKPT", "--reproduce"], ["triage", "--log", "L", "--ckpt", "C"],
                                     ["repair", "fp32", "CKPT", "--apply"]])
@pytest.mark.parametrize("value", ["0", "-5", "soon", "inf"])
def test_a_timeout_that_is_not_a_positive_number_is_a_usage_error(cli, command, value):
    proc = cli(*command, "--timeout", value)
    assert proc.returncode == 2 and "--timeout" in proc.stderr.decode() and "Traceback" not in proc.stderr.decode()
