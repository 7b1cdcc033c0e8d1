"""Classification for `serve` in worker processes, each request within a time budget.

A regex that backtracks holds the interpreter lock for as long as it runs, so a thread cannot
bound it and would stall every other request (`/healthz` included). Each request's log goes
to an idle worker process; a worker over the budget is killed and replaced, and the request
is answered 503. When every worker is busy a request waits up to `queue_wait` seconds for one,
then is answered 503 too: the pool bounds how much classifying runs at once.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading

_rules = None  # the worker process's rule set, loaded once


class Busy(Exception):
    """No worker became free in time."""


class OverBudget(Exception):
    """The classification ran past its time budget; its worker was replaced."""


def _serve(conn, rules_path) -> None:
    from triage.classify.classifier import classify
    from triage.kb import load_rules

    rules = load_rules(rules_path)
    conn.send(("ready", None))
    while True:
        try:
            text, truncated, decode_errors, cuts = conn.recv()
        except EOFError:
            return
        try:
            report = classify(text, rules=rules, truncated=truncated, decode_errors=decode_errors, cuts=cuts)
            conn.send(("ok", report.to_json()))
        except Exception as exc:  # answered as a 500 line by the server, never a traceback
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


class _Worker:
    def __init__(self, context, rules_path):
        self.conn, child = context.Pipe()
        self.proc = context.Process(target=_serve, args=(child, rules_path), daemon=True)
        self.proc.start()
        child.close()
        self.ready = False

    def wait_ready(self) -> None:
        if not self.ready:
            self.conn.recv()  # ("ready", None): the rules are loaded
            self.ready = True

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join(5)
        self.conn.close()


class ClassifyPool:
    def __init__(self, rules_path, size: int, budget: float, queue_wait: float = 5.0):
        # spawn, not fork: the server already runs threads, and a forked child could inherit a held lock
        self._context = multiprocessing.get_context("spawn")
        self.rules_path, self.budget, self.queue_wait = rules_path, budget, queue_wait
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        for _ in range(size):
            self._add()
        self.size = size

    def _add(self) -> None:
        worker = _Worker(self._context, self.rules_path)
        with self._lock:
            self._all.append(worker)
        self._idle.put(worker)

    def classify(self, text: str, truncated: bool, decode_errors: int, cuts: tuple = ()) -> dict:
        try:
            worker = self._idle.get(timeout=self.queue_wait)
        except queue.Empty:
            raise Busy(f"all {self.size} classify workers are busy") from None
        try:
            worker.wait_ready()
            worker.conn.send((text, truncated, decode_errors, cuts))
            if not worker.conn.poll(self.budget):
                raise OverBudget(f"classification took longer than its budget of {self.budget:g} s (--budget)")
            kind, value = worker.conn.recv()
        except BaseException:
            self._replace(worker)
            raise
        self._idle.put(worker)
        if kind == "error":
            raise RuntimeError(value)
        return value

    def _replace(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            self._all.remove(worker)
        self._add()

    def close(self) -> None:
        with self._lock:
            workers, self._all = self._all, []
        for worker in workers:
            worker.kill()
