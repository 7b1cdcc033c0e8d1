"""`serve`'s connections while they have no whole request head yet, all on one thread.

With a thread per connection, a slowloris (many connections that send their head a byte at a
time, or nothing) holds a thread for each one it opens, and the accept loop, which starts them,
falls behind: /healthz waited up to 0.6-2 s behind 1,500 of them here (once because the full
backlog dropped its SYN, retried after 1 s, then 3 and 7 s), 9-10 s in issue 40, for a 100 ms
promise. Here one selector thread holds every connection until its head has arrived: no thread
each, a deadline from the moment it came (or came back), the oldest dropped past a cap. A
connection with its head gets a thread for that one request, then comes back here to wait for
the next (keep-alive), so an idle connection never holds a thread.
"""

from __future__ import annotations

import collections
import selectors
import socket
import sys
import threading
import time

MAX_HEAD = 64 << 10  # past it http.server itself answers 414/431: hand it over
_ENDS = (b"\r\n\r\n", b"\n\n")


class Intake:
    def __init__(self, dispatch, *, deadline: float, cap: int):
        """`dispatch(sock, address, data)` takes a connection whose `data` (the bytes read so far)
        holds a whole request head; it runs on the intake's thread, so it only hands over."""
        self._dispatch, self._deadline, self._cap = dispatch, deadline, cap
        self._selector = selectors.DefaultSelector()
        self._pending: collections.OrderedDict = collections.OrderedDict()  # sock -> [address, data, deadline]
        self._inbox: collections.deque = collections.deque()
        self._wake_read, self._wake = socket.socketpair()
        for end in (self._wake_read, self._wake):
            end.setblocking(False)
        self._selector.register(self._wake_read, selectors.EVENT_READ)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="serve-intake", daemon=True)
        self._thread.start()

    def add(self, sock: socket.socket, address, data: bytes = b"") -> None:
        """Take a connection (from the accept loop, or back from a finished request); any thread."""
        self._inbox.append((sock, address, data))
        try:
            self._wake.send(b".")
        except (BlockingIOError, OSError):  # the wake-up pipe is full: the thread is awake anyway
            pass

    def close(self) -> None:
        self._closed = True
        self.add(None, None)
        self._thread.join(5)
        for sock in list(self._pending):
            self._drop(sock)
        for end in (self._wake_read, self._wake):
            end.close()

    def _run(self) -> None:
        while not self._closed:
            try:
                self._step()
            except Exception as exc:  # the intake must outlive any one connection's trouble
                sys.stderr.write(f"ds-triage serve: intake: {type(exc).__name__}: {exc}\n")

    def _step(self) -> None:
        for key, _ in self._selector.select(timeout=0.5):
            if key.fileobj is self._wake_read:
                try:
                    self._wake_read.recv(4096)
                except BlockingIOError:
                    pass
            else:
                self._read(key.fileobj)
        while self._inbox:
            sock, address, data = self._inbox.popleft()
            if sock is not None:
                self._take(sock, address, data)
        now = time.monotonic()
        while self._pending and next(iter(self._pending.values()))[2] < now:  # oldest first
            self._drop(next(iter(self._pending)))

    def _take(self, sock: socket.socket, address, data: bytes) -> None:
        if _whole(data):
            self._dispatch(sock, address, data)
            return
        while len(self._pending) >= self._cap:  # a slowloris past the cap loses its oldest connections
            self._drop(next(iter(self._pending)))
        try:
            sock.setblocking(False)
            self._selector.register(sock, selectors.EVENT_READ)
        except (OSError, ValueError):  # closed by the client meanwhile
            sock.close()
            return
        self._pending[sock] = [address, bytearray(data), time.monotonic() + self._deadline]

    def _read(self, sock: socket.socket) -> None:
        entry = self._pending[sock]
        try:
            chunk = sock.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError as exc:  # reset by the client: one line, as serve logs every connection it loses
            sys.stderr.write(f"ds-triage serve: {entry[0][0]} connection lost: {type(exc).__name__}: {exc}\n")
            chunk = b""
        if not chunk:
            self._drop(sock)
            return
        start = max(0, len(entry[1]) - 3)  # only the new bytes: a head sent a byte at a time stays linear
        entry[1] += chunk
        if _whole(entry[1], start):
            self._selector.unregister(sock)
            del self._pending[sock]
            sock.setblocking(True)
            self._dispatch(sock, entry[0], bytes(entry[1]))

    def _drop(self, sock: socket.socket) -> None:
        self._pending.pop(sock, None)
        try:
            self._selector.unregister(sock)
        except (KeyError, ValueError):
            pass
        sock.close()


def _whole(data: bytes, start: int = 0) -> bool:
    return len(data) > MAX_HEAD or any(data.find(end, start) >= 0 for end in _ENDS)
