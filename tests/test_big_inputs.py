"""Big and compressed logs (issue 20, point 7): a log past the 32 MiB cap is read by seeking to
its head and tail, a pipe or a .gz through a rolling tail, so memory stays bounded by the cap.

The logs are real: clean training chatter from corpus/clean/ as the bulk, a real failing load
from corpus/cases/ at the end, where a job's log ends.
"""

import gzip
import json
import os
import resource
import subprocess
import sys

import pytest

from tests.conftest import ROOT, corpus_log
from triage.errors import EXIT_BAD_INPUT, EXIT_FOUND
from triage.logs import inputs

FAILURE = "cases/job-zero3-train-then-stage2-load.log"  # DS-Z001 when classified alone
LIMIT = 1 << 30  # the address space the CLI gets: a 4 GiB log read whole cannot fit


def chatter(size: int) -> bytes:
    """At least `size` bytes of real clean-run chatter, whole lines."""
    text = b"".join(path.read_bytes() for path in sorted((ROOT / "corpus" / "clean").glob("*.log")))
    return text * (size // len(text) + 1)


def classify_capped(cli_env, *args, stdin=None):
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

    return subprocess.run([sys.executable, "-m", "triage", "classify", *map(str, args)], input=stdin,
                          capture_output=True, cwd=ROOT, env=cli_env, timeout=300, preexec_fn=cap)


@pytest.fixture
def cli_env(rule_cache):
    return dict(os.environ, XDG_CACHE_HOME=rule_cache, NO_COLOR="1")


def test_a_sparse_4_gib_log_is_read_at_both_ends_within_1_gib(tmp_path, cli_env):
    log = tmp_path / "job.log"
    failure = corpus_log(FAILURE).encode()
    with open(log, "wb") as out:
        out.write(chatter(inputs.HEAD_BYTES + 1024))
        out.truncate(4 << 30)  # a hole: 4 GiB the reader must never load
        out.seek(0, 2)
        out.write(b"\n" + failure)
    assert log.stat().st_blocks * 512 < 64 << 20  # sparse on disk indeed
    done = classify_capped(cli_env, log, "--json")
    assert done.returncode == EXIT_FOUND, done.stderr.decode()[-2000:]
    report = json.loads(done.stdout)
    assert report["hypotheses"][0]["rule_id"] == "DS-Z001"
    assert report["incident"]["truncated"] is True


def test_a_piped_log_past_the_cap_keeps_head_and_tail_within_1_gib(cli_env):
    failure = corpus_log(FAILURE).encode()
    piped = chatter(inputs.MAX_BYTES + (8 << 20)) + failure  # ~40 MiB through a pipe
    done = classify_capped(cli_env, "-", stdin=piped)
    assert done.returncode == EXIT_FOUND, done.stderr.decode()[-2000:]
    out = done.stdout.decode()
    assert "head and tail" in out and "DS-Z001" in out


@pytest.mark.parametrize("line", [b"\n", b"a\n"], ids=["blank", "one-character"])
def test_32_mib_of_tiny_lines_keeps_head_and_tail_lines_within_1_gib(cli_env, line):
    """Under the byte cap, but 16-32 million lines: the parser's cost is per line (it took 5.6 GB and
    3 minutes for blank lines before the line cap)."""
    failure = corpus_log(FAILURE).encode()
    piped = line * ((32 << 20) // len(line) - len(failure)) + failure
    done = classify_capped(cli_env, "-", "--json", stdin=piped)
    assert done.returncode == EXIT_FOUND, done.stderr.decode()[-2000:]
    report = json.loads(done.stdout)
    assert report["hypotheses"][0]["rule_id"] == "DS-Z001"
    assert report["incident"]["truncated"] is True


def test_keep_end_lines_is_exact():
    text = "".join(f"{n}\n" for n in range(100))
    assert inputs.keep_end_lines(text, head=10, most=30) == "".join(f"{n}\n" for n in [*range(10), *range(80, 100)])
    assert inputs.keep_end_lines("x\n" * 5 + "last", head=1, most=3) == "x\nx\nlast"


def test_keep_ends_is_exact_at_and_past_the_cap():
    chunks = [bytes([65 + i % 26]) * 999 + b"\n" for i in range(100)]  # 100,000 bytes, 100 lines
    whole = b"".join(chunks)
    data, size, dropped = inputs._keep_ends(iter(chunks), max_bytes=len(whole))
    assert (data, size, dropped) == (whole, len(whole), 0)
    cap = 50_000
    old_head, inputs.HEAD_BYTES = inputs.HEAD_BYTES, 10_000
    try:
        data, size, dropped = inputs._keep_ends(iter(chunks), max_bytes=cap)
    finally:
        inputs.HEAD_BYTES = old_head
    assert size == len(whole)
    assert data == whole[:10_000] + b"\n" + whole[-(cap - 10_000):]
    assert dropped == whole[10_000:-(cap - 10_000)].count(b"\n")  # the newlines left out


def test_a_gzip_log_classifies_as_the_plain_one(cli, tmp_path):
    plain = ROOT / "corpus" / FAILURE
    packed = tmp_path / "job.log.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    as_plain, as_gzip = cli("classify", plain, "--json"), cli("classify", packed, "--json")
    assert as_gzip.returncode == as_plain.returncode == EXIT_FOUND

    assert json.loads(as_gzip.stdout)["hypotheses"] == json.loads(as_plain.stdout)["hypotheses"]
    piped = cli("classify", "-", "--json", stdin=packed.read_bytes())
    assert json.loads(piped.stdout)["hypotheses"] == json.loads(as_plain.stdout)["hypotheses"]


@pytest.mark.parametrize("cut", ["truncated", "garbage"])
def test_a_broken_gzip_log_is_one_line_and_exit_3(cli, tmp_path, cut):
    packed = gzip.compress((ROOT / "corpus" / FAILURE).read_bytes())
    path = tmp_path / "job.log.gz"
    path.write_bytes(packed[: len(packed) // 2] if cut == "truncated" else packed + b"\x00garbage after the end")
    done = cli("classify", path)
    err = done.stderr.decode()
    assert done.returncode == EXIT_BAD_INPUT and "Traceback" not in err
    assert "is not a whole gzip file" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("how", ["file", "pipe", "gzip"])
def test_line_numbers_past_the_cut_are_the_whole_logs(tmp_path, cli_env, how):
    """Past 32 MiB and 300,000 lines the middle is left out, but a line keeps its number in the whole
    log (issue 44: `line 299807` was reported for line 507805)."""
    bulk = chatter(40 << 20)
    bulk = bulk[:bulk.rindex(b"\n", 0, 40 << 20) + 1]  # 40 MiB of whole lines: over both caps
    failure = corpus_log(FAILURE).encode()
    data = bulk + failure
    before = bulk.count(b"\n")
    assert before > inputs.MAX_LINES and len(data) > inputs.MAX_BYTES
    wanted = {n - before: n for n in range(before + 1, data.count(b"\n") + 2)}  # line in failure -> in the log
    log = tmp_path / "job.log"
    log.write_bytes(gzip.compress(data, 1) if how == "gzip" else data)
    done = classify_capped(cli_env, "-" if how == "pipe" else log, "--json", stdin=data if how == "pipe" else None)
    assert done.returncode == EXIT_FOUND, done.stderr.decode()[-2000:]
    report = json.loads(done.stdout)
    alone = json.loads(classify_capped(cli_env, "-", "--json", stdin=failure).stdout)  # the failure's own numbers
    assert report["incident"]["exception"]["line"] == wanted[alone["incident"]["exception"]["line"]]
    got = [e["line"] for e in report["hypotheses"][0]["evidence"] if e["line"]]
    assert max(got) > inputs.MAX_LINES  # evidence past the cut ...
    lines = data.decode().split("\n")
    for e in report["hypotheses"][0]["evidence"]:
        if e["line"]:
            assert e["text"].strip()[:60] in lines[e["line"] - 1]  # ... is the whole log's line at its number
