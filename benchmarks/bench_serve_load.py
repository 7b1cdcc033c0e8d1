#!/usr/bin/env python3
"""`ds-triage serve` under a fleet's load: connection resets, latency, and /healthz meanwhile.

    .venv/bin/python benchmarks/bench_serve_load.py [--clients 200] [--workers 2]

Starts `ds-triage serve` on a free loopback port, then N clients at once each POST /classify
a real corpus failure log, while one more client polls GET /healthz. Prints how many
connections were reset or refused, the p50/p99 latency of the classify requests, and the
median and worst /healthz latency under that load. Goals (issue 16): no resets at 200
clients, /healthz under 100 ms.
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASE = ROOT / "corpus" / "cases" / "zero3-saved-stage2-load-dp2.log"


def request(port: int, method: str, path: str, body: bytes | None = None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "text/plain"} if body else {})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "triage", "serve", "--port", "0", "--workers", str(args.workers)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    port = int(re.search(r":(\d+) ", proc.stderr.readline().decode()).group(1))
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    log = CASE.read_bytes()
    request(port, "POST", "/classify", log)  # the workers have loaded their rules

    start = threading.Barrier(args.clients + 1)
    latencies, statuses, resets, health = [], [], [], []
    done = threading.Event()

    def client() -> None:
        start.wait()
        t0 = time.monotonic()
        try:
            statuses.append(request(port, "POST", "/classify", log))
            latencies.append(time.monotonic() - t0)
        except OSError as exc:
            resets.append(repr(exc))

    def poll_health() -> None:
        start.wait()
        while not done.is_set():
            t0 = time.monotonic()
            request(port, "GET", "/healthz")
            health.append(time.monotonic() - t0)
            time.sleep(0.05)

    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    poller = threading.Thread(target=poll_health)
    for t in [*threads, poller]:
        t.start()
    wall = time.monotonic()
    for t in threads:
        t.join()
    wall = time.monotonic() - wall
    done.set()
    poller.join()
    proc.terminate()
    proc.wait(60)

    print(f"command: {sys.executable} benchmarks/bench_serve_load.py --clients {args.clients} --workers {args.workers}")
    print(f"{args.clients} concurrent clients, POST /classify of {CASE.name} ({len(log)} bytes), {args.workers} workers")
    print(f"connection resets/refusals: {len(resets)}; statuses: "
          + ", ".join(f"{s}: {statuses.count(s)}" for s in sorted(set(statuses))))
    if latencies:
        print(f"classify latency: p50 {percentile(latencies, 0.5) * 1000:.0f} ms, p99 {percentile(latencies, 0.99) * 1000:.0f} ms; "
              f"{len(latencies) / wall:.1f} requests/s")
    print(f"GET /healthz under that load: {len(health)} requests, median {statistics.median(health) * 1000:.1f} ms, "
          f"max {max(health) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
