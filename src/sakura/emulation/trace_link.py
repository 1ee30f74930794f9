"""An in-process link whose capacity follows a bandwidth trace (no privileges needed).

Delivery is modelled as one bottleneck queue: a chunk read at time ``t`` is released when the
trace has delivered its bytes after the link last went idle, so back-to-back chunks share the
link as they would on the wire. Each request first waits one round trip.

Time is the ``clock``'s (``time.monotonic`` by default) and a wait is the ``wait`` function's
(by default, sleeping until :meth:`TraceLink.close`): a test injects a virtual clock whose waits
advance it, and checks the pacing exactly without timing this machine.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from sakura.emulation.traces import BandwidthTrace

__all__ = ["TraceLink"]


class TraceLink:
    def __init__(self, trace: BandwidthTrace, *, rtt_s: float = 0.04, offset_s: float = 0.0,
                 clock: Callable[[], float] = time.monotonic,
                 wait: Callable[[float], object] | None = None) -> None:
        if rtt_s < 0 or offset_s < 0:
            raise ValueError("rtt_s and offset_s must be >= 0")
        self.trace, self.rtt_s, self.offset_s = trace, rtt_s, offset_s
        self._t0: float | None = None
        self._busy_until = 0.0
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._clock = clock
        self._wait = wait if wait is not None else self._closed.wait

    def close(self) -> None:
        """Wake every reader paced here: on a slow trace a queued chunk can wait for tens of
        seconds, and a closed transport must not leave its threads asleep that long."""
        self._closed.set()

    def start(self) -> None:
        """Trace time ``offset_s`` is now (called implicitly by the first request); reopens a closed link."""
        with self._lock:
            self._t0, self._busy_until = self._clock(), 0.0
            self._closed.clear()

    def elapsed(self) -> float:
        """Seconds of trace played since :meth:`start` (plus ``offset_s``, the trace position)."""
        if self._t0 is None:
            return self.offset_s
        return self.offset_s + self._clock() - self._t0

    def on_request(self) -> None:
        if self._t0 is None:
            self.start()
        if self.rtt_s:
            self._wait(self.rtt_s)

    def on_bytes(self, nbytes: int) -> None:
        if self._t0 is None:
            self.start()
        with self._lock:
            assert self._t0 is not None  # set by start(), never unset
            now = self._clock() - self._t0
            begin = max(now, self._busy_until)
            self._busy_until = begin + self.trace.transfer_time(self.offset_s + begin, nbytes)
            release = self._busy_until
        delay = release - (self._clock() - self._t0)
        if delay > 0:
            self._wait(delay)
