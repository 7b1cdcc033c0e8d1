"""`serve`'s connections: accepted, held by the intake until their request head has come, then
one request a thread; a kept-alive connection goes back to the intake between requests.

`ConnectionServer` and `ConnectionHandler` are http.server's classes with that life cycle;
http.py puts the routes on them. A client that resets its connection is one line on stderr,
never a traceback.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, HTTPServer

from triage.stream.intake import Intake


class ConnectionServer(HTTPServer):
    request_queue_size = 1024  # the listen backlog: a fleet's shippers connect at once

    def __init__(self, address, handler):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.intake = Intake(self._start, deadline=handler.timeout, cap=_open_cap())
        super().__init__(address, handler)  # closes the intake too if it cannot listen

    def process_request(self, request, client_address) -> None:
        self.intake.add(request, client_address)  # the accept loop only accepts

    def _start(self, sock, address, data: bytes) -> None:
        try:
            threading.Thread(target=self._one_request, args=(sock, address, data), daemon=True).start()
        except RuntimeError as exc:  # no thread to be had: this connection goes, the server stays
            sys.stderr.write(f"ds-triage serve: {address[0]} dropped: {exc}\n")
            sock.close()

    def _one_request(self, sock, address, data: bytes) -> None:
        """One request on its thread; a kept-alive connection then waits in the intake again."""
        handler = None
        try:
            handler = self.RequestHandlerClass(sock, address, self, data)
        except Exception:
            self.handle_error(sock, address)
        if handler is not None and not handler.close_connection:
            self.intake.add(sock, address, handler.rfile.rest())
        else:
            self.shutdown_request(sock)

    def handle_error(self, request, client_address) -> None:
        """One line, never a traceback (DS_TRIAGE_DEBUG=1 adds it): a client that resets its
        connection is routine for a server, not a failure of it."""
        kind, exc, _ = sys.exc_info()
        what = "connection lost" if isinstance(exc, (ConnectionError, TimeoutError)) else "error"
        sys.stderr.write(f"ds-triage serve: {client_address[0]} {what}: {kind.__name__}: {exc}\n")
        if os.environ.get("DS_TRIAGE_DEBUG"):
            traceback.print_exc()

    def server_close(self) -> None:
        super().server_close()
        self.intake.close()


def _open_cap() -> int:
    """Connections the intake holds at most: half the file descriptors, so accepting never fails."""
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return 4096 if soft == resource.RLIM_INFINITY else max(64, min(4096, soft // 2))


class ConnectionHandler(BaseHTTPRequestHandler):
    sys_version = ""
    protocol_version = "HTTP/1.1"
    timeout = 60  # seconds a client may take to send its request head, and for each read of its body

    def __init__(self, request, client_address, server, data: bytes = b""):
        self._data = data  # what the intake read: the request head, perhaps some body
        super().__init__(request, client_address, server)

    def setup(self) -> None:
        self.connection = self.request
        self.connection.settimeout(self.timeout)
        self.rfile, self.wfile = Reader(self.connection, self._data), Writer(self.connection)

    def handle(self) -> None:
        """One request: between requests the connection waits in the intake, not in a thread."""
        self.close_connection = True
        self.handle_one_request()

    def _refuse_unread(self) -> None:
        """The body will not be read: close after answering (it must not be taken for the next
        request), and linger so that the client, still sending, gets the answer and not a reset."""
        self.close_connection = True
        self._linger = True

    def finish(self) -> None:
        super().finish()
        if getattr(self, "_linger", False):
            _linger(self.connection)

    def log_message(self, format, *args):
        sys.stderr.write(f"ds-triage serve: {self.address_string()} {format % args}\n")


def _linger(sock: socket.socket, seconds: float = 2.0, most: int = 64 << 20) -> None:
    """Lingering close: stop writing, then read and drop what the client still sends (a bounded
    amount, for a bounded time). Closing with unread data would send a reset, and the client's
    stack may drop the 4xx answer it has not read yet."""
    try:
        sock.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + seconds
        drained = 0
        while drained < most and (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            chunk = sock.recv(1 << 16)
            if not chunk:
                return
            drained += len(chunk)
    except OSError:
        pass


class Reader:
    """A request's input: the bytes the intake already read, then the socket (what http.server
    reads with `readline` and `read`). What is left after a request goes back to the intake."""

    def __init__(self, sock: socket.socket, data: bytes):
        self._sock, self._buf = sock, bytearray(data)

    def _fill(self) -> bool:
        chunk = self._sock.recv(1 << 16)  # TimeoutError past the handler's timeout
        self._buf += chunk
        return bool(chunk)

    def readline(self, limit: int = -1) -> bytes:
        limit = limit if limit >= 0 else 1 << 62
        start = 0
        while (end := self._buf.find(b"\n", start, limit)) < 0 and len(self._buf) < limit:
            start = len(self._buf)
            if not self._fill():
                break
        return self._take(min(limit, end + 1 if end >= 0 else len(self._buf)))

    def read(self, size: int) -> bytes:
        """`size` bytes, or fewer when the client closed first."""
        while len(self._buf) < size and self._fill():
            pass
        return self._take(size)

    def _take(self, size: int) -> bytes:
        out = bytes(self._buf[:size])
        del self._buf[:size]
        return out

    def rest(self) -> bytes:
        return bytes(self._buf)

    def close(self) -> None:  # http.server closes its files; the socket outlives the request
        pass


class Writer:
    """A request's output, written whole (`sendall`), as socketserver's own writer does."""

    closed = False

    def __init__(self, sock: socket.socket):
        self._sock = sock

    def write(self, data) -> int:
        self._sock.sendall(data)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True
