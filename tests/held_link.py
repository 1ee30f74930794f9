"""A trace link that can hold a response open until the client has done something: an order of
events a test asserts is then forced by the link, not left to a race between this machine's
speed and the link's pace (issue 36, item 4)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from sakura.emulation import TraceLink

#: How long a held response waits at most: never reached while the client works (a hang guard).
HANG_GUARD_S = 60.0
#: How often a held response looks whether it may go on.
POLL_S = 0.005


class HeldLink(TraceLink):
    """A :class:`~sakura.emulation.TraceLink` whose :meth:`hold` holds the response to the next
    request but ``skip``: its first ``after_chunks`` chunks pass, then the next read waits until
    ``until()`` is true (or :data:`HANG_GUARD_S` has passed), and from then on nothing is held.
    While a response is held no other may stream (the client's requests ride behind it)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self.requests = 0
        self.chunks = 0  # read of the held response
        self.streaming = threading.Event()  # the held response's first chunk was read
        self._held: int | None = None  # the request whose response is held
        self._until: Callable[[], bool] = lambda: True
        self._after = 0

    def hold(self, until: Callable[[], bool], *, after_chunks: int = 0, skip: int = 0) -> None:
        with self._lock:
            self._held, self._until, self._after, self.chunks = self.requests + 1 + skip, until, after_chunks, 0

    def on_request(self) -> None:
        with self._lock:
            self.requests += 1
        super().on_request()

    def on_bytes(self, nbytes: int) -> None:
        with self._lock:
            # the held response's bytes: those read once its request was made and before the hold ends
            holding = self._held is not None and self.requests >= self._held
            if holding:
                self.chunks += 1
                self.streaming.set()
            wait = holding and self.chunks > self._after
        if wait:
            deadline = time.monotonic() + HANG_GUARD_S
            while not self._until() and time.monotonic() < deadline:
                time.sleep(POLL_S)
            with self._lock:
                self._held = None
        super().on_bytes(nbytes)
