"""Link bandwidth estimation that stays safe on mobile links.

The estimate is the smaller of two views of recent shard downloads: the bytes of the last few
transfers over their seconds (their throughputs' harmonic mean weighted by their bytes: pulled
down hard by one slow transfer, in proportion to how long it took) and a time-weighted EWMA (a
sample counts in proportion to how long it took, or to the silence before it when that was
longer: the sample after a silence is the only news of it). It is then discounted by the recent
relative prediction error, as robust MPC does: after a link surprised us, trust the estimate less.
Weighted alike, the transfers of an edit's first seconds (a preamble of megabytes, the phone's
one-second samples of the link before it, a shard hashes object of kilobytes) counted a short
slow sample as much as the whole preamble: klein 4B on a 5G walk planned its whole pass on the
phone at a third of the rate the preamble had just come at.

The discount fades while nothing is observed (halving every ``half_life_s`` since the newest
transfer ended). A phone that fetches observes the link many times a second, so this changes
nothing for it; a phone that computes after a surprise fetches nothing, and a discount that only
new samples could lift kept it computing for the rest of the edit: SD3.5 on a 5G trace whose
first seconds ran at 13 Mbit/s computed every block, where fetching them took 0.6 of the time.
"""

from __future__ import annotations

import collections
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sakura.edge_client.errors import ConfigError

__all__ = ["BandwidthEstimator", "Estimate"]


@dataclass(frozen=True)
class Estimate:
    bytes_per_s: float
    #: Largest relative error of recent predictions, |predicted - observed| / observed, faded by
    #: the time since the newest observation.
    error: float

    @property
    def point_bytes_per_s(self) -> float:
        """The estimate before its error discount: what times a request ahead (late idles the link,
        early only sends a request sooner), where the discounted one plans what to fetch."""
        return self.bytes_per_s * (1.0 + self.error)


class BandwidthEstimator:
    """Throughput from finished shard transfers, plus the request round trip (request to first byte)."""

    def __init__(self, window: int = 5, half_life_s: float = 2.0, initial_bytes_per_s: float | None = None,
                 clock: Callable[[], float] | None = time.monotonic) -> None:
        """``clock``: what :meth:`estimate` reads as now unless told; the observations' ``at``
        are on it. None: every caller tells the time (the simulator: its own)."""
        if window < 1 or half_life_s <= 0:
            raise ConfigError("window must be >= 1 and half_life_s > 0")
        self.window, self.half_life_s, self.clock = window, half_life_s, clock
        self._transfers: collections.deque[tuple[int, float]] = collections.deque(maxlen=window)  # bytes, seconds
        self._errors: collections.deque[float] = collections.deque(maxlen=window)
        self._ewma: float | None = None
        self._newest: float | None = None  # when the newest observed transfer ended
        self._initial = initial_bytes_per_s
        self._rtt: float | None = None
        self._lock = threading.Lock()

    def observe_rtt(self, seconds: float) -> None:
        if seconds >= 0 and math.isfinite(seconds):
            with self._lock:
                self._rtt = seconds if self._rtt is None else 0.3 * seconds + 0.7 * self._rtt

    @property
    def rtt_s(self) -> float:
        """Smoothed request-to-first-byte time (0 before any observation)."""
        with self._lock:
            return self._rtt or 0.0

    def observe(self, nbytes: int, seconds: float, *, at: float) -> None:
        """Record one finished transfer of ``nbytes`` that took ``seconds`` (first byte to last)
        and ended ``at`` (on the estimator's clock)."""
        if nbytes <= 0 or seconds <= 0 or not math.isfinite(seconds) or not math.isfinite(at):
            return
        rate = nbytes / seconds
        with self._lock:
            predicted = self._raw_locked()
            if predicted is not None:
                self._errors.append(abs(predicted - rate) / rate)
            self._transfers.append((nbytes, seconds))
            span = seconds if self._newest is None else max(seconds, at - self._newest)
            alpha = 1.0 - 0.5 ** (span / self.half_life_s)
            self._ewma = rate if self._ewma is None else alpha * rate + (1 - alpha) * self._ewma
            self._newest = at if self._newest is None else max(self._newest, at)

    def estimate(self, now: float | None = None) -> Estimate | None:
        """The discounted estimate at ``now`` (by default the clock's), or None before any
        observation (and no initial guess)."""
        if now is None:
            if self.clock is None:
                raise ConfigError("this estimator has no clock: pass now")
            now = self.clock()
        with self._lock:
            raw = self._raw_locked()
            error = max(self._errors, default=0.0)
            if self._newest is not None:
                error *= 0.5 ** (max(0.0, now - self._newest) / self.half_life_s)
        if raw is None:
            return None
        return Estimate(raw / (1.0 + error), error)

    def copy(self) -> BandwidthEstimator:
        """An estimator that knows what this one knows and observes on its own from here."""
        twin = BandwidthEstimator(self.window, self.half_life_s, self._initial, self.clock)
        with self._lock:
            twin._transfers.extend(self._transfers)
            twin._errors.extend(self._errors)
            twin._ewma, twin._newest, twin._rtt = self._ewma, self._newest, self._rtt
        return twin

    def _raw_locked(self) -> float | None:
        if not self._transfers:
            return self._initial
        recent = sum(nbytes for nbytes, _ in self._transfers) / sum(seconds for _, seconds in self._transfers)
        return min(recent, self._ewma) if self._ewma is not None else recent
