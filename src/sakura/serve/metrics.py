"""The shard service's metrics, exported through Ray's metrics.

In a Serve replica they are ``ray.serve.metrics`` instruments: Ray tags each series with its
``application``, ``deployment`` and ``replica`` and exports it, prefixed ``ray_``, from every node's
metrics endpoint (``ray start --metrics-export-port``), where Prometheus finds it through Ray's
service discovery file. So a counter is one series per replica, monotonic, and ``sum`` over
replicas is the service's; a per-replica ``/metrics`` behind Serve's proxy could only answer for
whichever replica the proxy picked. Outside a replica (tests, an app without Ray) they are kept in
memory and read with :meth:`ServeMetrics.value`.

:data:`METRICS` is the one list of what the service exports; the Grafana dashboard in
``infra/grafana`` queries only names from :func:`exported_names` (a test checks).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Protocol

TIERS = ("memory", "disk", "store")
#: The ``route`` label of a request that matched no route: one value, never the raw path (a scan
#: of random paths would otherwise create a series per path).
UNMATCHED_ROUTE = "unmatched"
#: Prefix Ray puts before every application metric it exports.
RAY_PREFIX = "ray_"
LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass(frozen=True)
class MetricSpec:
    name: str
    kind: str  # "counter" or "histogram"
    description: str
    tags: tuple[str, ...] = ()


REQUESTS = MetricSpec("sakura_requests", "counter", "HTTP requests by route template and status", ("route", "status"))
RESPONSE_BYTES = MetricSpec("sakura_response_bytes", "counter", "Body bytes sent, by route template", ("route",))
LATENCY = MetricSpec("sakura_request_seconds", "histogram", "Request latency in seconds, by route template",
                     ("route",))
TIER_HITS = MetricSpec("sakura_shard_tier_hits", "counter", "Shard reads answered by each tier", ("tier",))
STORE_ERRORS = MetricSpec("sakura_store_errors", "counter", "Errors from the object store, by kind", ("kind",))
CORRUPT = MetricSpec("sakura_corrupt_shards", "counter", "Shard reads whose bytes failed the sha256 check")
METRICS = (REQUESTS, RESPONSE_BYTES, LATENCY, TIER_HITS, STORE_ERRORS, CORRUPT)


def exported_names() -> frozenset[str]:
    """Every series name Ray's metrics endpoint can show for :data:`METRICS`."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}
    return frozenset(RAY_PREFIX + m.name + s for m in METRICS for s in suffixes[m.kind])


class Recorder(Protocol):
    """Where metric points go: Ray's metrics in a replica, memory elsewhere."""

    def add(self, metric: MetricSpec, amount: float, tags: dict[str, str]) -> None: ...

    def observe(self, metric: MetricSpec, value: float, tags: dict[str, str]) -> None: ...


class MemoryRecorder:
    """Counters and histogram sums/counts in a dict, for tests and apps without Ray."""

    def __init__(self) -> None:
        self.totals: defaultdict[tuple[str, tuple[tuple[str, str], ...]], float] = defaultdict(float)

    def add(self, metric: MetricSpec, amount: float, tags: dict[str, str]) -> None:
        self.totals[metric.name, tuple(sorted(tags.items()))] += amount

    def observe(self, metric: MetricSpec, value: float, tags: dict[str, str]) -> None:
        key = tuple(sorted(tags.items()))
        self.totals[metric.name + "_count", key] += 1
        self.totals[metric.name + "_sum", key] += value


class RayRecorder:
    """``ray.serve.metrics`` instruments, created in the replica (so Serve adds its tags)."""

    def __init__(self) -> None:
        from ray.serve import metrics

        # Ray annotates tag_keys as tuple[str] (one key); any tuple of keys is what it takes.
        self._counters = {m.name: metrics.Counter(m.name, m.description, tag_keys=m.tags)  # type: ignore[arg-type]
                          for m in METRICS if m.kind == "counter"}
        self._histograms = {m.name: metrics.Histogram(m.name, m.description, boundaries=list(LATENCY_BUCKETS_S),
                                                      tag_keys=m.tags)  # type: ignore[arg-type]
                            for m in METRICS if m.kind == "histogram"}

    def add(self, metric: MetricSpec, amount: float, tags: dict[str, str]) -> None:
        if amount > 0:  # Ray's counters raise on an increment of 0 (a 304, a redirect: no body bytes)
            self._counters[metric.name].inc(amount, tags=tags)

    def observe(self, metric: MetricSpec, value: float, tags: dict[str, str]) -> None:
        self._histograms[metric.name].observe(value, tags=tags)


class ServeMetrics:
    """What the API and the shard reader record, in the service's own words."""

    def __init__(self, recorder: Recorder | None = None) -> None:
        self.recorder = recorder or MemoryRecorder()

    def request(self, route: str, status: int, size: int, seconds: float) -> None:
        self.recorder.add(REQUESTS, 1, {"route": route, "status": str(status)})
        self.recorder.add(RESPONSE_BYTES, size, {"route": route})
        self.recorder.observe(LATENCY, seconds, {"route": route})

    def tier_hit(self, tier: str) -> None:
        self.recorder.add(TIER_HITS, 1, {"tier": tier})

    def store_error(self, kind: str) -> None:
        self.recorder.add(STORE_ERRORS, 1, {"kind": kind})

    def corrupt_shard(self) -> None:
        self.recorder.add(CORRUPT, 1, {})

    def value(self, name: str, **tags: str) -> float:
        """The in-memory total of ``name`` (``<histogram>_count``/``_sum`` too) summed over the
        series whose tags include ``tags``; only for a :class:`MemoryRecorder`."""
        if not isinstance(self.recorder, MemoryRecorder):
            raise TypeError("values are read from Ray's metrics endpoint, not from the replica")
        wanted = set(tags.items())
        return sum(v for (n, key), v in self.recorder.totals.items() if n == name and wanted <= set(key))
