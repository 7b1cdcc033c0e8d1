"""`ds-triage serve`: the classifier and the stream assembler over HTTP (stdlib http.server).

    POST /classify   a log (any text body: text/plain, curl's default form type; or JSON {"log": "..."})
                     -> the `classify --json` report (`curl --data-binary @job.log HOST:8080/classify`)
    POST /ingest     a shipper's batch -> {"records", "malformed", "no_message", "incidents": [...]}
                     JSON array or object, NDJSON, concatenated JSON (Fluent Bit http output
                     format json / json_lines / json_stream; Vector http sink json or ndjson),
                     optionally gzip; text/plain lines (?stream=NAME names their stream)
    POST /flush      close every open incident now -> {"incidents": [...]}
    GET  /incidents  ?since=ID&limit=N -> {"incidents": [...], "next": ID}
    GET  /healthz    -> {"status": "ok", ...}
    GET  /metrics    -> Prometheus text format (metrics.py)

Every answer is JSON, errors included ({"error": "...", "status": N}): 400 malformed, 404,
405 (with Allow), 411 no Content-Length, 413 over --max-body (after gunzip too), 415 a
content type (/ingest) or encoding it cannot read; 400 also for gzip that is truncated or followed by
trailing bytes, and for JSON nested deeper than the parser's recursion limit (~1000). 503 (with Retry-After)
when every classify worker stayed busy for --queue-wait seconds, or when one classification
ran past its --budget (its worker is replaced). Never a traceback: an unexpected failure is
a 500 with one line; DS_TRIAGE_DEBUG=1 prints the traceback to the server's stderr.

Load: the listen backlog holds 1024 waiting connections (socketserver's default of 5 reset
connections from a fleet); the accept loop only accepts, and one thread (intake.py) holds every
connection until its request head has come, so a slowloris holds no thread and cannot stall
the accept loop; a request gets a thread, but classifying runs in a bounded pool of worker
processes (workers.py), so a slow request never holds the others or /healthz. A client that
sends less body than its Content-Length gets a 400; one that resets is one line on stderr.
"""

from __future__ import annotations

import json
import os
import time
import traceback
import zlib
from urllib.parse import parse_qs, urlsplit

from triage import __version__
from triage.errors import BadInput
from triage.stream.connection import ConnectionHandler, ConnectionServer
from triage.stream.ingest import Ingest, json_values
from triage.stream.metrics import CONTENT_TYPE as METRICS_TYPE, Metrics
from triage.stream.workers import Busy, OverBudget
from triage.stream.records import Decoder

ROUTES = {"/classify": "POST", "/ingest": "POST", "/flush": "POST", "/incidents": "GET", "/healthz": "GET",
          "/metrics": "GET"}
JSON_TYPES = {"application/json", "application/x-ndjson", "application/ndjson", "application/jsonl",
              "application/x-jsonlines", "application/json-lines", "application/jsonlines"}
TEXT_TYPES = {"text/plain", "application/octet-stream", ""}
# json's C parser stops at the interpreter's recursion limit, without exhausting the stack.
DEEP = "JSON nested too deeply (over ~1000 levels) is refused"
HINTS = {
    "application/msgpack": "Fluent Bit's http output sends msgpack by default: set `format json_lines`",
    "application/x-www-form-urlencoded": "send the log as text/plain (curl --data-binary @job.log -H 'Content-Type: text/plain')",
}


class HTTPError(Exception):
    def __init__(self, status: int, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


class Server(ConnectionServer):
    def __init__(self, address, *, ingest: Ingest, decoder: Decoder, classify, rules_count: int, max_body: int,
                 metrics: Metrics | None = None):
        self.ingest, self.decoder, self.classify = ingest, decoder, classify
        self.rules_count, self.max_body = rules_count, max_body
        self.metrics = metrics or Metrics(ingest.open_incidents)
        ingest.on_close = self.metrics.closed
        super().__init__(address, Handler)


class Handler(ConnectionHandler):
    server: Server
    server_version = f"ds-triage/{__version__}"

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def do_PATCH(self):
        self._dispatch("PATCH")

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        self._consumed = False
        self._route = url.path if url.path in ROUTES else "other"  # a metrics label: never the raw path
        self._started = time.monotonic()
        try:
            allowed = ROUTES.get(url.path)
            if allowed is None:
                raise HTTPError(404, f"no route {url.path}; routes: " + ", ".join(f"{m} {p}" for p, m in ROUTES.items()))
            if method != allowed:
                raise HTTPError(405, f"{url.path} takes {allowed}", {"Allow": allowed})
            query = parse_qs(url.query)
            status, body = getattr(self, "_" + url.path.strip("/"))(query)
            self._send(status, body)
        except ConnectionError:  # the client is gone: nobody to answer (Server.handle_error logs it)
            self.close_connection = True
            raise
        except HTTPError as exc:
            if not self._consumed and self.headers.get("Content-Length", "0") != "0":
                self._refuse_unread()
            self._send(exc.status, {"error": exc.message, "status": exc.status}, exc.headers)
        except Exception as exc:  # never a traceback in a response
            if os.environ.get("DS_TRIAGE_DEBUG"):
                traceback.print_exc()
            self._send(500, {"error": f"internal error: {type(exc).__name__}: {exc}", "status": 500})

    # routes
    def _metrics(self, query):
        return 200, self.server.metrics.text()

    def _healthz(self, query):
        return 200, {"status": "ok", "version": __version__, "rules": self.server.rules_count,
                     "open_incidents": self.server.ingest.open_incidents()}

    def _incidents(self, query):
        after, limit = _int(query, "since", 0), _int(query, "limit", 100)
        found = self.server.ingest.since(after, max(1, min(limit, 1000)))
        return 200, {"incidents": found, "next": found[-1]["id"] if found else after}

    def _flush(self, query):
        self._body(required=False)  # no body needed; a too-large one is still refused
        return 200, {"incidents": self.server.ingest.flush()}

    def _classify(self, query):
        kind, data = self._body()
        if kind in JSON_TYPES:
            try:
                value = json.loads(data.decode("utf-8"))
            except RecursionError:
                raise HTTPError(400, DEEP) from None
            except (UnicodeDecodeError, ValueError) as exc:
                raise HTTPError(400, f"body is not valid JSON ({exc})") from None
            if not isinstance(value, dict) or not isinstance(value.get("log"), str):
                raise HTTPError(400, 'a JSON body must be an object with the log text in "log"')
            data = value["log"].encode("utf-8")
        # Any other type is the log itself: curl's default (a form type, for --data-binary @job.log),
        # text/*, none. A body that is not text (msgpack, a shard posted by mistake) is refused by
        # decode_log as binary, with the same 400 a file of it gets.
        from triage.logs.inputs import decode_log

        try:
            log = decode_log(data, "the request body")
        except BadInput as exc:
            raise HTTPError(400, exc.message) from None
        try:
            report = self.server.classify(log.text, truncated=log.truncated, decode_errors=log.decode_errors,
                                          cuts=log.cuts)
        except Busy as exc:
            raise HTTPError(503, f"{exc}; retry later", {"Retry-After": "5"}) from None
        except OverBudget as exc:
            raise HTTPError(503, f"{exc}; send a shorter log", {"Retry-After": "5"}) from None
        self.server.metrics.classified.labels(report.get("category", "unknown")).inc()
        return 200, report

    def _ingest(self, query):
        kind, data = self._body()
        text = data.decode("utf-8", errors="replace")
        if kind in JSON_TYPES:
            try:
                values, unparsed = json_values(text)
            except RecursionError:
                raise HTTPError(400, DEEP) from None
            result = self.server.ingest.add_values(values, self.server.decoder)
            result["malformed"] += unparsed
            if not result["records"] and (result["malformed"] or not values):
                raise HTTPError(400, f"no log record could be read from the body ({result['malformed']} malformed "
                                     f"values, {result['no_message']} objects without a message field)")
        elif kind in TEXT_TYPES:
            result = self.server.ingest.add_lines(text, (query.get("stream") or [None])[0])
        else:
            raise self._unsupported(kind)
        self.server.metrics.records.inc(result["records"])
        self.server.metrics.malformed.inc(result["malformed"])
        return 200, result

    # plumbing
    def _body(self, required: bool = True) -> tuple[str, bytes]:
        """(content type, body bytes), refused early when it is too large to take."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self._refuse_unread()
            raise HTTPError(411, "chunked bodies are not read; send Content-Length")
        length = self.headers.get("Content-Length")
        if length is None:
            if not required:
                return "", b""
            raise HTTPError(411, "Content-Length is required")
        try:
            size = int(length)
        except ValueError:
            raise HTTPError(400, f"bad Content-Length: {length!r}") from None
        if size < 0:
            raise HTTPError(400, f"bad Content-Length: {length!r}")
        limit = self.server.max_body
        if size > limit:
            self._refuse_unread()
            raise HTTPError(413, f"body of {size} bytes is over the limit of {limit} (--max-body)")
        try:
            data = self.rfile.read(size)
        except TimeoutError:
            raise HTTPError(400, f"body shorter than its Content-Length of {size} bytes: the rest did not come "
                                 f"within {self.timeout} s") from None
        if len(data) < size:
            raise HTTPError(400, f"body of {len(data)} bytes is shorter than its Content-Length of {size}")
        self._consumed = True
        encoding = self.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding in ("gzip", "x-gzip"):
            data = _gunzip(data, limit)
        elif encoding not in ("", "identity"):
            raise HTTPError(415, f"Content-Encoding {encoding} is not supported (gzip is)")
        kind = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        return kind, data

    def _unsupported(self, kind: str) -> HTTPError:
        hint = HINTS.get(kind, "send application/json, application/x-ndjson or text/plain")
        return HTTPError(415, f"Content-Type {kind or '(none)'} is not accepted here; {hint}")

    def _send(self, status: int, body: dict | bytes, headers: dict | None = None) -> None:
        """JSON, or the metrics text (bytes); every answer is counted and timed for /metrics."""
        if isinstance(body, bytes):
            payload, kind = body, METRICS_TYPE
        else:
            payload, kind = (json.dumps(body, ensure_ascii=False) + "\n").encode("utf-8"), "application/json; charset=utf-8"
        if hasattr(self, "_started"):
            self.server.metrics.answered(self._route, status, time.monotonic() - self._started)
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)

    def send_error(self, code, message=None, explain=None):
        """http.server's own errors (a bad request line, headers too long) as JSON too."""
        self.close_connection = True
        self._send(code, {"error": message or self.responses.get(code, ("error",))[0], "status": code})

def _gunzip(data: bytes, limit: int) -> bytes:
    """The whole body, or a 400: a truncated stream must not be classified as if it were whole.
    Several gzip members one after another are one body (RFC 1952, as `gzip -c a b` writes)."""
    out = bytearray()
    while True:
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out += inflate.decompress(data, limit + 1 - len(out))
        except zlib.error as exc:
            raise HTTPError(400, f"body is not valid gzip ({exc})") from None
        if len(out) > limit or inflate.unconsumed_tail:
            raise HTTPError(413, f"body is over the limit of {limit} bytes once decompressed (--max-body)")
        if not inflate.eof:
            raise HTTPError(400, "gzip body is truncated (the stream ends before its end marker and checksum)")
        data = inflate.unused_data
        if not data:
            return bytes(out)
        if not data.startswith(b"\x1f\x8b"):
            raise HTTPError(400, f"gzip body is followed by {len(data)} bytes that are not gzip")


def _int(query: dict, name: str, default: int) -> int:
    values = query.get(name)
    if not values:
        return default
    try:
        return int(values[0])
    except ValueError:
        raise HTTPError(400, f"{name} must be an integer, not {values[0]!r}") from None
