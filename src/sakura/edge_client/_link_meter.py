"""The one owner of link measurement: what the link delivered, what each finished response
teaches the :class:`~sakura.edge_client.estimator.BandwidthEstimator`, and one download's own rate.

Several requests share the link (the fetch stage keeps some in flight), so a response's rate is
what the link delivered in aggregate while it was busy with it, not its own bytes alone. A
response is busy from its first byte, or from its request plus one round trip when it came in one
read (a small shard), to its last byte. Every time here is the transport's clock
(``time.monotonic``, which its replies carry); the edit's timeline converts once
(:meth:`LinkMeter.offset_to`).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable

from sakura.edge_client.estimator import BandwidthEstimator

__all__ = ["DownloadRate", "LinkMeter"]


class LinkMeter:
    """A session's link: every byte it delivered over time, and the estimator it feeds."""

    def __init__(self, estimator: BandwidthEstimator, clock: Callable[[], float] | None = None) -> None:
        """``clock``: by default the estimator's, since the times the meter reports it are on it."""
        self.estimator, self.clock = estimator, clock or estimator.clock or time.monotonic
        self._lock = threading.Lock()
        self._times: list[float] = [0.0]
        self._totals: list[int] = [0]

    def offset_to(self, other: Callable[[], float]) -> float:
        """What to add to this meter's times to read them on the ``other`` clock (an edit's)."""
        return other() - self.clock()

    def add(self, nbytes: int) -> None:
        """The link delivered ``nbytes`` just now (a chunk of some response)."""
        if nbytes > 0:
            with self._lock:
                self._times.append(self.clock())
                self._totals.append(self._totals[-1] + nbytes)

    def delivered(self, t0: float, t1: float) -> int:
        """Bytes the link delivered in ``(t0, t1]`` (those :meth:`add` was told of)."""
        with self._lock:
            end, begin = (bisect.bisect_right(self._times, t) - 1 for t in (t1, t0))
            return self._totals[end] - self._totals[begin]

    def round_trip(self, seconds: float) -> None:
        """A request's time to its first byte, with nothing else queued on the link before it."""
        self.estimator.observe_rtt(seconds)

    def response(self, nbytes: int, *, first_byte_at: float | None, arrived_at: float,
                 requested_at: float | None = None, counted: bool = True) -> None:
        """A response of ``nbytes`` finished: teach the estimator the link's rate while it was
        busy with it. ``counted``: its bytes were :meth:`add`-ed as they came (else they count
        here only: added as one lump at its end they would inflate the rate of a response that
        overlaps it)."""
        start = arrived_at - max(arrived_at - first_byte_at if first_byte_at is not None else 0.0,
                                 arrived_at - requested_at - self.estimator.rtt_s if requested_at is not None else 0.0)
        others = self.delivered(start - 1e-6, arrived_at) + (0 if counted else nbytes)
        if arrived_at > start:
            self.estimator.observe(max(nbytes, others), arrived_at - start, at=arrived_at)

    def abandoned(self, nbytes: int, seconds: float) -> None:
        """A download given up for a smaller level: its rate until then."""
        self.estimator.observe(nbytes, seconds, at=self.clock())


class DownloadRate:
    """One download's own progress: its bytes go to the meter, and its rate since its first chunk
    (the first chunk's wait is the round trip, not the link's rate) decides abandonment."""

    def __init__(self, meter: LinkMeter) -> None:
        self.meter = meter
        self._seen = 0
        self._first: tuple[float, int] | None = None  # when the first chunk came, and its bytes
        self.rate, self.elapsed = 0.0, 0.0

    def update(self, received: int) -> bool:
        """``received`` bytes so far; False at the first chunk (no rate yet), else True with
        :attr:`rate` and :attr:`elapsed` since the first chunk."""
        now = self.meter.clock()
        self.meter.add(received - self._seen)
        self._seen = received
        if self._first is None:
            self._first = (now, received)
            return False
        self.elapsed = now - self._first[0]
        self.rate = (received - self._first[1]) / self.elapsed if self.elapsed > 0 else 0.0
        return True

    @property
    def measured(self) -> int:
        """Bytes since the first chunk (what :attr:`rate` is measured over)."""
        return self._seen - (self._first[1] if self._first is not None else 0)
