"""`ds-triage batch INPUT... --out DIR`: stream's incidents over stored logs, on Apache Spark."""

from __future__ import annotations

import json
import os
import sys

from triage.cli.output import add_docs_url_option, add_rules_options
from triage.cli.stream import add_record_options, add_window_options, decoder
from triage.errors import EXIT_BAD_INPUT, EXIT_FOUND, EXIT_UNKNOWN, BadInput
from triage.runbook.links import ENV, page_ref

OUTPUT_FORMATS = ("jsonl", "parquet")


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "batch",
        help="classify the incidents in stored logs on Apache Spark (a fleet's month of logs)",
        description="Read plain logs (one job a file) or JSON-lines records of log shippers and stores from files, "
        "directories or globs on any filesystem Spark reads (local, HDFS, S3, GCS, ...), group the lines by stream "
        "as `stream` does, assemble and classify each incident with stream's code, and write the incidents "
        f"({page_ref('reference/stream')}, one a line or a Parquet row) and a category x job x day summary under "
        "--out. Runs in Spark local mode (local[*]) unless --master or spark-submit names a cluster. Needs the "
        "batch extra (pyspark) and Java 17+. Exit 0 when an incident has a checkpoint-loading cause, 1 when none "
        "did.",
    )
    parser.add_argument("inputs", nargs="+", metavar="INPUT",
                        help="a file, directory (read recursively) or glob, local or a Hadoop filesystem URL")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="where to write incidents/, summary/ and totals/ (must not exist yet)")
    parser.add_argument("--format", dest="output_format", choices=OUTPUT_FORMATS, default="jsonl",
                        help="output files: JSON lines (default) or Parquet")
    parser.add_argument("--master", metavar="URL",
                        help="Spark master (default local[*]; under spark-submit, the one it was given)")
    parser.add_argument("--partitions", type=_positive_int, metavar="N",
                        help="tasks the streams are spread over (default: Spark's parallelism, at least the input's splits)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting, e.g. spark.executor.memory=8g (repeat for several)")
    add_record_options(parser, "--input-format")
    add_window_options(parser)
    add_rules_options(parser, where=", readable at this path on every executor (so are --extra-rules)")
    add_docs_url_option(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from triage.batch.spark import Job, require_pyspark
    from triage.errors import UsageError
    from triage.stream.limits import Limits

    require_pyspark()  # before anything else: one line saying how to install it
    conf = {}
    for item in args.conf:
        name, eq, value = item.partition("=")
        if not eq or not name:
            raise UsageError(f"--conf {item!r}: give KEY=VALUE, e.g. --conf spark.executor.memory=8g")
        conf[name] = value
    _check_local(args.inputs, args.out)
    from triage.kb.index import extra_rules_dirs, load_rules

    extra = tuple(str(d.resolve()) for d in extra_rules_dirs())
    if args.rules or extra:
        load_rules(args.rules)  # invalid rules: exit 4 here, not in an executor
    job = Job(inputs=[_url(p) for p in args.inputs], out=_url(args.out), output_format=args.output_format,
              master=args.master, decoder=decoder(args),
              limits=Limits(gap=args.gap, max_lines=args.max_lines, max_bytes=args.max_bytes),
              rules_dir=os.path.abspath(args.rules) if args.rules else None, extra_rules=extra,
              docs_url=args.docs_url or os.environ.get(ENV), partitions=args.partitions, conf=conf)
    totals = _run(job)
    print(json.dumps(totals, ensure_ascii=False))
    if not args.quiet:
        print(human_summary(totals), file=sys.stderr)
    for path, reason in totals["binary_files"].items():
        print(f"ds-triage: error: {reason} (skipped)", file=sys.stderr)
    if totals["binary_files"]:
        return EXIT_BAD_INPUT
    return EXIT_FOUND if totals["checkpoint_incidents"] else EXIT_UNKNOWN


def _run(job) -> dict:
    from triage.batch.spark import run, session

    spark = session(job.master, job.conf)
    try:
        return run(job, spark)
    finally:
        spark.stop()


def _check_local(inputs: list[str], out: str) -> None:
    """What can be told without Spark, for local paths: a missing input, an --out that exists."""
    import glob

    for path in inputs:
        if _remote(path):
            continue
        local = path.removeprefix("file:")
        if not (glob.has_magic(local) and glob.glob(local)) and not os.path.exists(local):
            raise BadInput(f"no such file or directory: {path}")
    if not _remote(out) and os.path.exists(out.removeprefix("file:")):
        raise BadInput(f"--out {out} exists: batch never writes into an existing directory; name a new one")


def _remote(path: str) -> bool:
    scheme = path.partition("://")[0] if "://" in path else ""
    return bool(scheme) and scheme != "file"


def _url(path: str) -> str:
    """Local paths absolute (executors may run elsewhere in the tree); URLs as given."""
    return path if _remote(path) or path.startswith("file:") else os.path.abspath(path)


def human_summary(t: dict) -> str:
    rate = t["bytes"] / 1e6 / t["seconds"] if t["seconds"] else 0.0
    binary = f"; {len(t['binary_files'])} binary files skipped" if t["binary_files"] else ""
    return (f"ds-triage batch: {t['files']:,} files, {t['lines']:,} lines ({t['bytes'] / 1e6:,.1f} MB) in "
            f"{t['seconds']:.1f} s ({rate:,.1f} MB/s, {t['master']}); {t['incidents']} incidents "
            f"({t['checkpoint_incidents']} checkpoint-loading); {t['malformed']} malformed, {t['no_message']} without "
            f"a message{binary}; written to {t['out']}")


def _positive_int(text: str) -> int:
    from triage.cli.stream import _positive

    return _positive(int)(text)
