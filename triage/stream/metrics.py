"""GET /metrics on `serve`: its counters in the Prometheus text format.

prometheus_client (imported by serve only, never on classify's path) keeps them in a registry
of their own: incidents closed and logs classified by category, records read, malformed JSON
values, requests by route and status, answer latency by route, incidents open now.
"""

from __future__ import annotations

from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    def __init__(self, open_incidents: Callable[[], int]):
        self.registry = registry = CollectorRegistry()
        self.incidents = Counter("ds_triage_incidents", "Incidents closed by serve's stream assembly, by category",
                                 ["category"], registry=registry)
        self.classified = Counter("ds_triage_classified", "Logs classified by POST /classify, by category",
                                  ["category"], registry=registry)
        self.records = Counter("ds_triage_records", "Log records (lines) read by POST /ingest", registry=registry)
        self.malformed = Counter("ds_triage_malformed", "JSON values in /ingest bodies that could not be read",
                                 registry=registry)
        self.requests = Counter("ds_triage_requests", "HTTP requests answered, by route and status",
                                ["route", "status"], registry=registry)
        self.latency = Histogram("ds_triage_request_seconds", "Time to answer a request, by route", ["route"],
                                 registry=registry)
        Gauge("ds_triage_open_incidents", "Incidents being assembled now",
              registry=registry).set_function(open_incidents)

    def closed(self, incident: dict) -> None:
        self.incidents.labels(_category(incident.get("classification"))).inc()

    def answered(self, route: str, status: int, seconds: float) -> None:
        self.requests.labels(route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def text(self) -> bytes:
        return generate_latest(self.registry)


def _category(report) -> str:
    return report.get("category", "unknown") if isinstance(report, dict) else "unknown"
