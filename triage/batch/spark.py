"""The Spark job of `ds-triage batch`: two passes over whole files, a shuffle of few lines.

The only module that imports pyspark (the `batch` extra), and only when `batch` runs.

1. Each file, whole, through stream's block scanner on an executor (files.py): the incidents
   of its own stream (plain logs: one job a file) are final there; of the streams records
   name (pods, spanning files) only those that may open an incident come back to the driver,
   with the literals their lines can be found by.
2. Only when there are such streams: the files that may hold them are read again, each
   candidate stream's lines found by its literal without decoding (route.py), shuffled by
   stream, and each stream's lines, in input order, go through the same scanner and
   assembler (streams.py).

The incidents are few: they are kept, numbered in order of where they start, written, and
summed up by category x job x day.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import partial

from triage.batch import plan, source, tasks, windows
from triage.errors import BadInput, MissingDependency
from triage.stream.limits import Limits
from triage.stream.records import Decoder

INSTALL = "pip install 'ds-triage[batch]'"
LOCAL = "local[*]"
# How Spark packs files into tasks: its default counts 4 MB for opening a file, which puts
# ~30 small logs in a task of 128 MB and makes hundreds of tasks; a whole file costs little
# here next to scanning it, and a task of 64 MB is a few seconds of scanning.
FILE_PACKING = {"spark.sql.files.openCostInBytes": str(256 << 10), "spark.sql.files.maxPartitionBytes": str(64 << 20)}
_LOG4J = os.path.join(os.path.dirname(__file__), "log4j2.properties")


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
    extra_rules: tuple[str, ...] = ()  # --extra-rules: directories loaded beside rules_dir on every executor
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
    given = spark.sparkContext.getConf()
    for name, value in FILE_PACKING.items():
        if not given.contains(name):  # --conf and spark-submit's settings stand
            spark.conf.set(name, value)
    return spark


def run(job: Job, spark) -> dict:
    """Run the job; the totals (also written to OUT/totals)."""
    from pyspark.sql import types as T

    started = time.monotonic()
    sc = spark.sparkContext
    files = _files(spark, job.inputs)
    fields = (job.decoder.format, job.decoder.message_fields, job.decoder.key_fields)  # a Decoder holds a parser
    setup = (fields, job.limits, job.rules_dir, job.extra_rules, job.docs_url)
    first = files.mapPartitions(partial(tasks.first_pass, setup)).persist()
    facts = plan.gather(first.filter(lambda item: item[0] != "incident").collect())
    if not any(lines for _, lines, _ in facts.files.values()):
        raise BadInput(f"no file with any line under {', '.join(job.inputs)}")
    incidents = first.filter(lambda item: item[0] == "incident").map(lambda item: item[1])
    parts = job.partitions or sc.defaultParallelism
    second = plan.second_pass(facts)
    if second:
        keys, literals, order, named = second
        wanted = set(named)
        shared = sc.broadcast((keys, literals, order))
        routed = files.filter(lambda row: row[0] in wanted) \
            .mapPartitions(lambda rows: tasks.route_pass(fields, shared.value, rows))
        incidents = incidents.union(routed.groupByKey(parts).flatMap(
            lambda item: tasks.stream_pass(setup, shared.value[0], item)))
    incidents = incidents.coalesce(parts).persist()
    # what the summary needs of each incident, collected: they are few, and small
    facts.incidents = incidents.map(lambda d: (d["classification"]["category"], windows.job(d), windows.day(d))) \
        .collect()
    found = len(facts.incidents)
    first.unpersist()
    numbered = incidents.sortBy(windows.order, numPartitions=max(1, min(parts, found // 5000 + 1))) \
        .zipWithIndex().map(_numbered)
    out = job.out.rstrip("/")
    if job.output_format == "parquet":
        spark.createDataFrame(numbered.map(_parquet_row), _parquet_schema(T)).write.parquet(f"{out}/incidents")
    else:
        _text(spark, numbered.map(lambda d: json.dumps(d, ensure_ascii=False)), f"{out}/incidents")
    incidents.unpersist()
    table = Counter(facts.incidents)
    rows = sorted(((*key, n) for key, n in table.items()), key=lambda r: (r[2] or "", r[2] is not None, r[1], r[0]))
    summary = spark.createDataFrame(rows, "category string, job string, day string, incidents long").coalesce(1)
    if job.output_format == "parquet":
        summary.write.parquet(f"{out}/summary")
    else:
        summary.write.json(f"{out}/summary", ignoreNullFields=False)
    by_category = dict(sorted(Counter(category for category, _, _ in facts.incidents).items()))
    stats = facts.stats
    totals = {
        "schema_version": 1,
        "kind": "batch-summary",
        "inputs": job.inputs,
        "out": job.out,
        "format": job.output_format,
        "master": sc.master,
        "spark": spark.version,
        "executor_cores": sc.defaultParallelism,
        "files": len(facts.files),
        "lines": sum(lines for _, lines, _ in facts.files.values()),
        "bytes": sum(size for size, _, _ in facts.files.values()),
        "records": stats.get("records", 0),
        "malformed": stats.get("malformed", 0),
        "no_message": stats.get("no_message", 0),
        "incidents": found,
        "checkpoint_incidents": found - by_category.get("unknown", 0),
        "by_category": by_category,
        "binary_files": dict(sorted(facts.binary.items())),
        "seconds": round(time.monotonic() - started, 3),
    }
    _text(spark, sc.parallelize([json.dumps(totals)], 1), f"{out}/totals")
    return totals


def _files(spark, inputs: list[str]):
    """The files as an RDD of (file, content or None). Spark lists them (globs, directories,
    any filesystem); local files are read by the executors' Python, in blocks, and are spread
    over tasks by size; others come with their content, read by Spark's binaryFile source."""
    from pyspark.errors import AnalysisException

    try:
        files = spark.read.format("binaryFile").option("recursiveFileLookup", "true").load(inputs)
    except AnalysisException as exc:
        raise BadInput(_first_line(exc)) from None
    if not all(_local(spark, path) for path in inputs):
        return files.select("path", "content").rdd.map(tuple)
    paths = sorted(source.file_url(url) for url in files.inputFiles())  # the listing, without a job
    groups = source.by_size(paths, spark.sparkContext.defaultParallelism)
    return spark.sparkContext.parallelize(groups, max(1, len(groups))).flatMap(lambda group: [(p, None) for p in group])


def _local(spark, path: str) -> bool:
    if "://" in path or path.startswith("file:"):
        return path.startswith("file:")
    try:  # a path without a scheme is on the default filesystem (HDFS on many clusters)
        default = spark.sparkContext._jsc.hadoopConfiguration().get("fs.defaultFS") or "file:///"
    except Exception:  # noqa: BLE001 - not this JVM's API: read as Spark reads
        return False
    return default.startswith("file:")


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
