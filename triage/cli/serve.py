"""`ds-triage serve`: POST /classify, POST /ingest (Fluent Bit / Vector HTTP sinks), GET /healthz."""

from __future__ import annotations

import sys

from triage.errors import EXIT_FOUND, BadInput
from triage.runbook.links import page_ref

DEFAULT_PORT = 8080
DEFAULT_MAX_BODY = 16 << 20  # Vector's http sink batches up to 10 MB by default


def register(subparsers) -> None:
    from triage.cli.stream import add_arguments

    parser = subparsers.add_parser(
        "serve",
        help="HTTP endpoint: classify a log, ingest shipper batches (loopback by default)",
        description="Serve the classifier over HTTP: POST /classify (one log), POST /ingest (batches from "
        "Fluent Bit's http output or Vector's http sink; incidents are assembled per stream across batches), "
        "POST /flush, GET /incidents, GET /healthz. Closed incidents are also printed to stdout, one JSON line "
        f"each ({page_ref('reference/stream')}). Binds to 127.0.0.1 unless told otherwise; no authentication.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1, loopback only)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 picks a free one)")
    parser.add_argument("--max-body", type=int, default=DEFAULT_MAX_BODY, metavar="BYTES",
                        help=f"largest request body, also after gunzip (default {DEFAULT_MAX_BODY}); larger is 413")
    parser.add_argument("--keep", type=int, default=1000, metavar="N", help="incidents kept for GET /incidents (default 1000)")
    parser.add_argument("--workers", type=int, default=2, metavar="N",
                        help="classify worker processes: at most N POST /classify run at once (default 2)")
    parser.add_argument("--budget", type=float, default=30.0, metavar="SECONDS",
                        help="time one POST /classify may take; over it the worker is replaced and the answer is 503 (default 30)")
    parser.add_argument("--queue-wait", type=float, default=30.0, metavar="SECONDS",
                        help="how long a POST /classify waits for a free worker before a 503 (default 30)")
    add_arguments(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from triage.cli.stream import _write_line, build
    from triage.kb import load_rules
    from triage.stream.http import Server
    from triage.stream.ingest import Ingest
    from triage.stream.workers import ClassifyPool

    if (args.max_body <= 0 or args.keep <= 0 or args.workers <= 0 or args.budget <= 0 or args.queue_wait < 0
            or not 0 <= args.port <= 65535):
        from triage.errors import UsageError

        raise UsageError("--max-body, --keep, --workers and --budget must be positive, --port 0-65535")
    rules = load_rules(args.rules)
    pool = ClassifyPool(args.rules, args.workers, args.budget, args.queue_wait)
    ingest = Ingest(lambda write: build(args, write), keep=args.keep, write=_write_line)
    try:
        server = Server((args.host, args.port), ingest=ingest, decoder=ingest.triage.decoder,
                        classify=pool.classify, rules_count=len(rules.rules), max_body=args.max_body)
    except OSError as exc:
        pool.close()
        raise BadInput(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    host, port = server.server_address[:2]
    if not _loopback(args.host):
        print(f"ds-triage serve: warning: {args.host} is reachable from other hosts and there is no "
              "authentication; put it behind a proxy that checks who calls", file=sys.stderr)
    print(f"ds-triage serve: listening on http://{_url_host(host)}:{port} "
          "(POST /classify, POST /ingest, POST /flush, GET /incidents, GET /healthz, GET /metrics)", file=sys.stderr, flush=True)
    # SIGTERM asks serve_forever to return. Raising from the handler instead would be caught by
    # socketserver's per-request `except Exception` when it lands mid-request, and the server
    # would go on; shutdown() must come from another thread, as it waits for the loop to end.
    import signal
    import threading

    signal.signal(signal.SIGTERM, lambda signum, frame: threading.Thread(target=server.shutdown, daemon=True).start())
    ingest.start_ticker()
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        server.server_close()
        pool.close()
        ingest.stop()
        ingest.flush()  # an incident still open at shutdown is emitted, not lost
    return EXIT_FOUND


def _loopback(host: str) -> bool:
    import ipaddress

    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
