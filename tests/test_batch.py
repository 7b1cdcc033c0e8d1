"""`ds-triage batch` gives `stream`'s incidents, on real Spark in local mode.

The inputs are real corpus logs only: failure and healthy logs as plain files (one job a
file, one of them as CRI container lines), and the benchmark's fleet (corpus/fleet_log.py,
as benchmarks/bench_stream.py and bench_batch.py build it) as Fluent Bit records of 12 pods
interleaved, cut into two files so that each pod's stream spans both. `stream` reads the same
bytes; the incidents must be the same to the byte, but for what says where a line is (batch
names the file, and counts lines per file) and `seq` (batch numbers by place, stream by close).

One SparkSession for the module (starting the JVM is most of the time), and one CLI run.
"""

import json

import pytest

from corpus import fleet_log
from tests import stream_envelopes as env
from tests.conftest import CORPUS, ROOT
from tests.test_probe_cli import _validator, errors
from tests.test_stream_corpus import streamed
from triage.batch.spark import Job, run, session
from triage.errors import BadInput
from triage.stream.records import Decoder

RULES = str(ROOT / "rules")
CASES = ["job-zero3-train-then-stage2-load", "zero3-saved-stage2-load-dp2", "pp2-saved-load-pp1",
         "zero2-dp1-latest-deleted", "tp2-saved-load-tp1"]
INCIDENT = _validator("stream.schema.json")


@pytest.fixture(scope="module")
def spark():
    spark = session("local[2]")
    yield spark
    spark.stop()


def incidents_of(spark, out, form="jsonl") -> list[dict]:
    if form == "jsonl":
        return [json.loads(r.value) for r in spark.read.text(f"{out}/incidents").collect()]
    rows = []
    for r in spark.read.parquet(f"{out}/incidents").collect():
        d = r.asDict(recursive=True)
        del d["category"]
        d["classification"] = json.loads(d["classification"])
        rows.append(d)
    return rows


def same(incidents: list[dict]) -> list[str]:
    return sorted(json.dumps({k: v for k, v in i.items() if k != "seq"}, sort_keys=True) for i in incidents)


def test_plain_files_one_job_each_give_streams_incidents(spark, rules, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in CASES:
        (logs / f"{name}.log").write_bytes((CORPUS / "cases" / f"{name}.log").read_bytes())
    for path in sorted((CORPUS / "clean").glob("*.log"))[:3]:
        (logs / path.name).write_bytes(path.read_bytes())
    (logs / "cri" / "trainer-0.log").parent.mkdir()  # a directory is read recursively
    (logs / "cri" / "trainer-0.log").write_text("\n".join(env.cri(env.case_lines(CASES[1]))) + "\n")
    (logs / "model_states.pt").write_bytes(b"PK\x03\x04" + bytes(range(32)) * 4096)  # a shard among the logs

    want = []
    for path in sorted(p for p in logs.rglob("*.log")):
        for incident in streamed(rules, path.read_bytes()):
            assert incident["stream"] == {}
            url = f"file:{path}"
            want.append(dict(incident, stream={"file": url}, files={"first": url, "last": url}))
    assert len(want) == len(CASES) + 1  # each failure once, the healthy runs nothing

    totals = run(Job([str(logs)], str(tmp_path / "out"), rules_dir=RULES), spark)
    got = incidents_of(spark, tmp_path / "out")
    assert same(got) == same(want)
    assert sorted(i["seq"] for i in got) == list(range(1, len(got) + 1))
    assert [errors(INCIDENT, i) for i in got] == [[]] * len(got)
    assert totals["binary_files"] == {f"file:{logs / 'model_states.pt'}": totals["binary_files"][
        f"file:{logs / 'model_states.pt'}"]} and "torch .pt file" in next(iter(totals["binary_files"].values()))
    assert totals["files"] == 10 and totals["incidents"] == len(want) == totals["checkpoint_incidents"]
    summary = [json.loads(r.value) for r in spark.read.text(str(tmp_path / "out" / "summary")).collect()]
    assert sum(row["incidents"] for row in summary) == len(want)
    assert {(row["job"], row["category"]) for row in summary} == {
        (i["stream"]["file"], i["classification"]["category"]) for i in want}
    assert {row["day"] for row in summary} <= {"2026-12-02", "2026-12-03", None}


def test_the_benchmark_fleet_in_fluent_bit_records_across_two_files(spark, rules, tmp_path):
    """The bench's input (corpus/fleet_log.py): 12 pods interleaved; the streams span two files."""
    failures = [(f"cases/{p.stem}", fleet_log.read_lines(p)) for p in sorted((CORPUS / "cases").glob("*.log"))[::12]]
    fleet = fleet_log.jobs(1_000_000, failures, fleet_log.clean_logs(), pods=12)
    lines = list(fleet_log.fluentbit_lines(fleet))
    cut = len(lines) // 2
    logs = tmp_path / "fluentbit"
    logs.mkdir()
    (logs / "2025-12-02T21.jsonl").write_text("\n".join(lines[:cut]) + "\n")
    (logs / "2025-12-02T22.jsonl").write_text("\n".join(lines[cut:]) + "\n")
    want = streamed(rules, ("\n".join(lines) + "\n").encode())
    assert len(want) >= len(failures) // 2 > 0

    run(Job([str(logs / "*.jsonl")], str(tmp_path / "out"), output_format="parquet", rules_dir=RULES,
            decoder=Decoder("fluentbit")), spark)
    got = incidents_of(spark, tmp_path / "out", "parquet")
    second = f"file:{logs / '2025-12-02T22.jsonl'}"
    spans = sum(i["files"]["first"] != i["files"]["last"] for i in got)
    for incident in got:  # back to stream's line numbers over the two files read as one
        for end in ("first", "last"):
            incident["lines"][end] += cut if incident["files"].pop(end) == second else 0
        del incident["files"]
    assert same(got) == same(want)
    # the cut is crossed (else the two files would test nothing), at most once a pod: a stream has
    # one incident open at a time
    assert 1 <= spans <= 12


def test_a_missing_input_is_bad_input(spark, tmp_path):
    with pytest.raises(BadInput, match="PATH_NOT_FOUND|does not exist"):
        run(Job(["file:" + str(tmp_path / "gone" / "*.log")], str(tmp_path / "out")), spark)


def test_the_command_line(cli, tmp_path):
    """End to end: local[1], the totals on stdout, exit 0; an --out that exists is refused before Spark starts."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "job.log").write_bytes((CORPUS / "cases" / f"{CASES[0]}.log").read_bytes())
    proc = cli("batch", logs, "--out", tmp_path / "out", "--master", "local[1]")
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    totals = json.loads(proc.stdout)
    assert totals["incidents"] == totals["checkpoint_incidents"] == 1 and totals["master"] == "local[1]"
    assert "ds-triage batch: 1 files" in proc.stderr.decode() and "Traceback" not in proc.stderr.decode()
    again = cli("batch", logs, "--out", tmp_path / "out")
    assert again.returncode == 3 and again.stderr.decode().splitlines() == [
        f"ds-triage: error: --out {tmp_path / 'out'} exists: batch never writes into an existing directory; name a new one"]
    missing = cli("batch", tmp_path / "gone", "--out", tmp_path / "out2")
    assert missing.returncode == 3 and "no such file or directory" in missing.stderr.decode()


def test_without_pyspark_one_line_and_exit_7_and_classify_never_imports_it(cli, tmp_path):
    fake = tmp_path / "site" / "pyspark"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no pyspark here')\n")
    proc = cli("batch", CORPUS / "cases", "--out", tmp_path / "out", env={"PYTHONPATH": f"{fake.parent}:{ROOT}"})
    assert proc.returncode == 7
    assert proc.stderr.decode().splitlines() == [
        "ds-triage: error: batch needs Apache Spark's Python package, pyspark: pip install 'ds-triage[batch]'"]
    check = ("import sys; from triage.cli import main; main(['classify', '-q', sys.argv[1]]); "
             "print(sorted(m for m in sys.modules if m.startswith(('pyspark', 'py4j', 'triage.batch'))))")
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", check, str(CORPUS / "cases" / f"{CASES[0]}.log")],
                         capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.splitlines()[-1] == "[]"
