"""The Spark job of `ds-triage batch`: read, decode, shuffle by stream, assemble, write.

The only module that imports pyspark (the `batch` extra), and only when `batch` runs.

Two passes over the input: the JVM alone counts the lines of each file split (cheap, no
Python), which gives every line its number in its file; then the Python pass decodes each
line (rows.py), the shuffle brings each stream's records together in input order, and
windows.py makes its incidents. The incidents are few: they are kept, numbered in order of
where they start, written, and summed up by category x job x day.
"""

from __future__ import annotations

import json
import os
import sys
import time
import zlib
from dataclasses import dataclass, field
from functools import partial

from triage.batch import windows
from triage.batch.rows import decode_rows
from triage.errors import EXIT_MISSING, BadInput, TriageError
from triage.stream.limits import Limits
from triage.stream.records import Decoder

INSTALL = "pip install 'ds-triage[batch]'"
LOCAL = "local[*]"
_LOG4J = os.path.join(os.path.dirname(__file__), "log4j2.properties")


class MissingDependency(TriageError):
    exit_code = EXIT_MISSING


def require_pyspark():
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise MissingDependency(f"batch needs Apache Spark's Python package, pyspark: {INSTALL}") from None
    return pyspark


@dataclass
class Job:
    inputs: list[str]
    out: str
    output_format: str = "jsonl"  # jsonl | parquet
    master: str | None = None  # None: local[*], unless spark-submit chose one
    decoder: Decoder = field(default_factory=Decoder)
    limits: Limits = field(default_factory=Limits)
    rules_dir: str | None = None
    docs_url: str | None = None
    partitions: int | None = None  # reduce tasks (default: Spark's parallelism, at least the input's splits)
    conf: dict = field(default_factory=dict)


def session(master: str | None, conf: dict | None = None):
    """The SparkSession: local[*] by default; under spark-submit the master it was given."""
    require_pyspark()
    from pyspark.sql import SparkSession

    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit started the JVM: its master stands
    builder = SparkSession.builder.appName("ds-triage batch")
    if master or not submitted:
        builder = builder.master(master or LOCAL)
    if not submitted:
        # the executors' Python is this one (same venv, same ds-triage), and Spark keeps quiet
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{_LOG4J}")
        if (master or LOCAL).startswith("local"):
            builder = builder.config("spark.ui.enabled", "false")
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    for name, value in (conf or {}).items():
        builder = builder.config(name, value)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # no Java, a bad master URL: the JVM did not start
        raise MissingDependency(f"cannot start Spark ({_first_line(exc)}); it needs Java 17 or later "
                                "(JAVA_HOME or java on PATH) and a reachable --master") from None
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run(job: Job, spark) -> dict:
    """Run the job; the totals (also written to OUT/totals)."""
    from pyspark.sql import types as T

    started = time.monotonic()
    sc = spark.sparkContext
    lines = _read(spark, job.inputs)
    splits = _count(lines)
    if not splits:
        raise BadInput(f"no file with any line under {', '.join(job.inputs)}")
    offsets, files = _offsets(splits)
    acc = sc.accumulator({}, _Totals())
    fields = (job.decoder.format, job.decoder.message_fields, job.decoder.key_fields)  # a Decoder holds a parser

    def decode(rows):
        stats = Decoder(*fields)
        binary = {}
        yield from decode_rows(((r[0], r[1], r[2]) for r in rows), stats, binary.__setitem__)
        acc.add(dict(stats.stats, binary=binary))

    parts = job.partitions or max(sc.defaultParallelism, lines.rdd.getNumPartitions())
    shared = sc.broadcast(offsets)
    records = lines.rdd.mapPartitions(decode)
    ordered = records.map(lambda r: ((r[0], r[1], r[2], r[3]), r)).repartitionAndSortWithinPartitions(
        parts, partitionFunc=_partition)
    limits, rules_dir, docs_url = job.limits, job.rules_dir, job.docs_url
    incidents = ordered.mapPartitions(lambda items: windows.assemble_sorted(
        (r for _, r in items), shared.value, limits, rules_dir, docs_url)).persist()
    found = incidents.count()  # runs the job once: accumulators and the kept incidents
    numbered = incidents.sortBy(windows.order, numPartitions=max(1, min(parts, found))).zipWithIndex() \
        .map(_numbered)
    out = job.out.rstrip("/")
    if job.output_format == "parquet":
        spark.createDataFrame(numbered.map(_parquet_row), _parquet_schema(T)).write.parquet(f"{out}/incidents")
    else:
        _text(spark, numbered.map(lambda d: json.dumps(d, ensure_ascii=False)), f"{out}/incidents")
    table = incidents.map(lambda d: ((d["classification"]["category"], windows.job(d), windows.day(d)), 1)) \
        .reduceByKey(lambda a, b: a + b)
    summary = spark.createDataFrame(table.map(lambda kv: (*kv[0], kv[1])),
                                    "category string, job string, day string, incidents long")
    summary = summary.orderBy("day", "job", "category").coalesce(1)
    if job.output_format == "parquet":
        summary.write.parquet(f"{out}/summary")
    else:
        summary.write.json(f"{out}/summary", ignoreNullFields=False)
    by_category = dict(sorted(table.map(lambda kv: (kv[0][0], kv[1])).reduceByKey(lambda a, b: a + b).collect()))
    stats = acc.value
    totals = {
        "schema_version": 1,
        "kind": "batch-summary",
        "inputs": job.inputs,
        "out": job.out,
        "format": job.output_format,
        "master": sc.master,
        "spark": spark.version,
        "executor_cores": sc.defaultParallelism,
        "files": len(files),
        "lines": sum(n for n, _ in splits.values()),
        "bytes": sum(files.values()),
        "records": stats.get("records", 0),
        "malformed": stats.get("malformed", 0),
        "no_message": stats.get("no_message", 0),
        "incidents": found,
        "checkpoint_incidents": found - by_category.get("unknown", 0),
        "by_category": by_category,
        "binary_files": dict(sorted(stats.get("binary", {}).items())),
        "seconds": round(time.monotonic() - started, 3),
    }
    incidents.unpersist()
    _text(spark, sc.parallelize([json.dumps(totals)], 1), f"{out}/totals")
    return totals


def _read(spark, inputs: list[str]):
    from pyspark.errors import AnalysisException

    try:
        lines = spark.read.option("lineSep", "\n").option("recursiveFileLookup", "true").text(inputs)
        return lines.select("value", "_metadata.file_path", "_metadata.file_block_start", "_metadata.file_size")
    except AnalysisException as exc:
        raise BadInput(_first_line(exc)) from None


def _count(lines) -> dict[tuple[str, int], tuple[int, int]]:
    """(file, split start) -> (lines in the split, file size): the JVM alone, no Python."""
    rows = lines.groupBy("file_path", "file_block_start").agg({"*": "count", "file_size": "max"}).collect()
    return {(r[0], r[1]): (r[2], r[3]) for r in rows}


def _offsets(splits) -> tuple[dict[tuple[str, int], int], dict[str, int]]:
    """Lines of the file before each split; each file's size."""
    offsets, files, before = {}, {}, {}
    for (path, block), (count, size) in sorted(splits.items()):
        offsets[(path, block)] = before.get(path, 0)
        before[path] = before.get(path, 0) + count
        files[path] = size
    return offsets, files


def _partition(key) -> int:
    return zlib.crc32(key[0].encode())  # the stream key alone: a stream's records meet in one task


def _numbered(pair):
    incident, index = pair
    incident["seq"] = index + 1
    return incident


def _text(spark, rdd, path: str) -> None:
    spark.createDataFrame(rdd.map(lambda s: (s,)), "value string").write.text(path)


def _parquet_schema(T):
    """stream.schema.json's incident as columns: the nested parts that have a fixed shape as
    structs, the classification (classify.schema.json) as its JSON text, its category beside it."""
    long_, str_ = T.LongType(), T.StringType()
    return T.StructType([
        T.StructField("schema_version", long_), T.StructField("kind", str_), T.StructField("seq", long_),
        T.StructField("stream", T.MapType(str_, str_)),
        T.StructField("files", T.StructType([T.StructField("first", str_), T.StructField("last", str_)])),
        T.StructField("lines", T.StructType([T.StructField(n, long_) for n in ("first", "last", "count")])),
        T.StructField("time", T.StructType([T.StructField("first", str_), T.StructField("last", str_)])),
        T.StructField("closed_by", str_),
        T.StructField("excerpt", T.StructType([T.StructField("text", str_)] + [
            T.StructField(n, long_) for n in ("lines", "context_lines", "omitted_lines", "cut_lines")] + [
            T.StructField("truncated", T.BooleanType())])),
        T.StructField("category", str_),
        T.StructField("classification", str_),
    ])


def _parquet_row(d: dict) -> tuple:
    e, t = d["excerpt"], d["time"]
    return (d["schema_version"], d["kind"], d["seq"], d["stream"], (d["files"]["first"], d["files"]["last"]),
            (d["lines"]["first"], d["lines"]["last"], d["lines"]["count"]),
            None if t is None else (t["first"], t["last"]), d["closed_by"],
            (e["text"], e["lines"], e["context_lines"], e["omitted_lines"], e["cut_lines"], e["truncated"]),
            d["classification"]["category"], json.dumps(d["classification"], ensure_ascii=False))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _Totals():
    from pyspark.accumulators import AccumulatorParam

    class Totals(AccumulatorParam):
        """Counts add up; the binary files (file -> reason) are merged."""

        def zero(self, value):
            return {}

        def addInPlace(self, a, b):
            for name, value in b.items():
                a[name] = {**a.get(name, {}), **value} if isinstance(value, dict) else a.get(name, 0) + value
            return a

    return Totals()
