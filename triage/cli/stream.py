"""`ds-triage stream [FILE|-]`: classify incidents as log lines flow by, one JSON line each."""

from __future__ import annotations

import json
import os
import stat
import sys
import time

from triage.cli.log_source import log_source
from triage.cli.output import add_docs_url_option, add_progress_options, add_rules_options
from triage.errors import EXIT_FOUND, EXIT_INTERRUPTED, EXIT_UNKNOWN, UsageError
from triage.runbook.links import page_ref

# triage.stream.records.FORMAT_NAMES, written out: building the parser must not import the record
# decoder (msgspec, ~40 ms) on classify's path (tests/test_stream_cli.py checks they are equal)
FORMAT_NAMES = ("auto", "plain", "cri", "json", "docker", "fluentbit", "vector", "loki", "elasticsearch")


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "stream",
        help="classify incidents in an unbounded log stream (plain, CRI, JSON shippers)",
        description="Read plain log lines or JSON lines from log shippers and stores (Kubernetes, Fluent Bit, "
        "Vector, Loki, Elasticsearch), assemble each incident per stream and print one JSON line per incident "
        f"({page_ref('reference/stream')}). Training chatter prints nothing. Exit 0 when an incident has a "
        "checkpoint-loading cause, 1 when none did.",
    )
    add_arguments(parser)
    parser.add_argument("log", nargs="?", help="log file, or - for stdin (default: stdin when piped)")
    parser.add_argument("--summary", action="store_true",
                        help="end with a JSON summary line on stdout (a one-line summary always goes to stderr)")
    parser.add_argument("--decode-all", action="store_true",
                        help="decode every record, not only the prefilter's candidates: exact malformed counts, slower")
    parser.add_argument("--jobs", type=_positive(int), metavar="N", default=None,
                        help="processes reading a file of 64 MB or more, each a share of it, with the answer one "
                        "process gives (default: one per core this process may use; 1 reads it here alone)")
    add_progress_options(parser)
    parser.set_defaults(run=run)


def add_arguments(parser) -> None:
    """The record and assembly options, shared with `ds-triage serve`."""
    add_record_options(parser)
    _limit_option(parser, "--idle", "SECONDS",
                  "close an incident after this long without a new trigger line in its stream")
    add_window_options(parser)
    for flag, metavar, what in (
            ("--max-open", "N", "incidents open at once; past it the stalest is emitted early"),
            ("--max-held", "BYTES", "bytes all open incidents may hold together; past it the stalest is emitted early"),
            ("--max-streams", "N", "streams remembered; past it the least recent is forgotten, its incident emitted")):
        _limit_option(parser, flag, metavar, what)
    add_rules_options(parser)
    add_docs_url_option(parser)


def add_record_options(parser, flag: str = "--format") -> None:
    """How records are read (shared with `batch`, whose input format is --input-format)."""
    parser.add_argument(flag, dest="input_format", choices=FORMAT_NAMES, default="auto",
                        help="input format (default auto: plain, CRI or JSON, per line)")
    parser.add_argument("--message-field", metavar="PATH", action="append",
                        help="field holding the log text (dotted path; repeat to try several; default per format)")
    parser.add_argument("--key-fields", metavar="PATHS",
                        help="comma-separated fields naming a stream, e.g. kubernetes.pod_name,host,rank (default per format)")


def add_window_options(parser) -> None:
    """How long an incident is and what it keeps (shared with `batch`)."""
    for flag, metavar, what in (
            ("--gap", "LINES", "close an incident after this many lines of its stream without a trigger"),
            ("--max-lines", "N", "lines kept per incident, head and tail"),
            ("--max-bytes", "N", "bytes kept per incident")):
        _limit_option(parser, flag, metavar, what)


def _limit_option(parser, flag: str, metavar: str, what: str) -> None:
    """A field of Limits (`--max-open` is Limits.max_open) as a positive option of its type, its
    default in the help."""
    from triage.stream.limits import Limits

    default = getattr(Limits(), flag[2:].replace("-", "_"))
    shown = f"{default:g}" if isinstance(default, float) else str(default)
    parser.add_argument(flag, type=_positive(type(default)), default=default, metavar=metavar,
                        help=f"{what} (default {shown})")


def decoder(args):
    """The record Decoder the options describe (stream, serve, batch)."""
    from triage.stream.records import Decoder

    keys = tuple(k.strip() for k in args.key_fields.split(",") if k.strip()) if args.key_fields else None
    if args.key_fields is not None and not keys:
        raise UsageError("--key-fields: name at least one field, e.g. --key-fields kubernetes.pod_name")
    return Decoder(args.input_format, tuple(args.message_field) if args.message_field else None, keys)


def build(args, write):
    """The StreamTriage the options describe (shared with `serve`)."""
    from triage.kb import load_rules
    from triage.stream.assemble import Limits
    from triage.stream.pipeline import StreamTriage

    limits = Limits(gap=args.gap, idle=args.idle, max_lines=args.max_lines, max_bytes=args.max_bytes,
                    max_open=args.max_open, max_held=args.max_held, max_streams=args.max_streams)
    from triage.errors import BadRules
    from triage.stream.prefilter import UnfilterableRule

    try:
        return StreamTriage(load_rules(args.rules), write, decoder=decoder(args), limits=limits,
                            decode_all=getattr(args, "decode_all", False))
    except UnfilterableRule as exc:  # `rules lint` refuses such a rule too; a rules dir may skip lint
        raise BadRules(f"{exc}") from None


def run(args) -> int:
    from triage import progress
    from triage.stream.source import open_input, pump

    source = log_source(args.log, "kubectl logs -f POD | ds-triage stream")
    fd = open_input(source)
    triage = build(args, _write_line)
    interrupted = False
    with progress.meter("stream", _size(fd)) as shown:
        try:
            pump(fd, triage, lambda read: _counts(shown, triage, read), jobs=args.jobs or _cores())
        except KeyboardInterrupt:  # Ctrl-C: what was read is still closed, emitted and summed up
            interrupted = True
            triage.finish(time.monotonic())
    summary = dict(triage.summary(), interrupted=interrupted)
    if args.summary:
        _write_line(summary)
    if not args.quiet:
        print(human_summary(summary), file=sys.stderr)
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_FOUND if summary["checkpoint_incidents"] else EXIT_UNKNOWN


def _counts(shown, triage, read: int) -> None:
    shown.set_postfix_str(f"{triage.scanner.lines:,} lines, {triage.incidents} incidents, "
                          f"{triage.checkpoint_incidents} checkpoint-loading", refresh=False)
    shown.update(read)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def _size(fd: int) -> int | None:
    """The size of a regular file (the meter's total); None for a pipe or a terminal."""
    st = os.fstat(fd)
    return st.st_size if stat.S_ISREG(st.st_mode) and st.st_size else None


def _write_line(data: dict) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")
    sys.stdout.flush()  # a consumer on the other end of a pipe sees each incident at once


def human_summary(s: dict) -> str:
    rate = s["bytes"] / 1e6 / s["seconds"] if s["seconds"] else 0.0
    return (f"ds-triage stream: {'interrupted (Ctrl-C) after ' if s.get('interrupted') else ''}{s['lines']:,} lines ({s['bytes'] / 1e6:,.1f} MB) in {s['seconds']:.2f} s "
            f"({rate:,.1f} MB/s); {s['incidents']} incidents ({s['checkpoint_incidents']} checkpoint-loading), "
            f"{s['candidates']} candidate windows; {s['malformed']} malformed, {s['no_message']} without a message; "
            f"{s['evicted']} evicted")


def _positive(kind):
    import argparse

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
        return value
    return parse
