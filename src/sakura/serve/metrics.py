"""Prometheus metrics of one replica (each replica exposes its own; Prometheus sums them)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

TIERS = ("memory", "disk", "store")


class ServeMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("sakura_requests", "HTTP requests", ["route", "status"], registry=self.registry)
        self.bytes = Counter("sakura_response_bytes", "Body bytes sent", ["route"], registry=self.registry)
        self.latency = Histogram("sakura_request_seconds", "Request latency", ["route"], registry=self.registry,
                                 buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
        self.tier_hits = Counter("sakura_shard_tier_hits", "Shard reads answered by each tier", ["tier"], registry=self.registry)
        self.store_errors = Counter("sakura_store_errors", "Errors from the object store", ["kind"], registry=self.registry)
        self.corrupt = Counter("sakura_corrupt_shards", "Shard reads whose bytes failed the sha256 check", registry=self.registry)
        for tier in TIERS:
            self.tier_hits.labels(tier)

    def render(self) -> bytes:
        return generate_latest(self.registry)
