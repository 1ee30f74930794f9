"""A virtual clock for tests: time moves only when a waiter waits, by exactly what it waits, so a
test checks pacing and deadlines exactly and never times this machine."""

from __future__ import annotations

import threading


class VirtualClock:
    """``now()`` is the virtual time; ``wait(seconds)`` advances it by ``seconds`` at once (one
    waiter at a time: the clock of a single-threaded sequence of waits)."""

    def __init__(self, start: float = 0.0) -> None:
        self._now, self._lock = start, threading.Lock()
        self.waits: list[float] = []

    def now(self) -> float:
        with self._lock:
            return self._now

    def wait(self, seconds: float) -> bool:
        with self._lock:
            self.waits.append(seconds)
            self._now += max(0.0, seconds)
        return False  # as ``Event.wait`` when nothing woke it
