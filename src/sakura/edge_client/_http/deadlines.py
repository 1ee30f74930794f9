"""How long the network may take: every operation, and every edit, must keep up a minimum
useful rate.

An operation is one document or shard across all its attempts and resumes. It may fall behind
``min_rate`` by at most ``timeout_s`` per attempt: ``elapsed <= attempts * timeout_s + received /
min_rate``, with downloads in flight together each owed their share of the rate. An attempt that
falls behind is *stalled*: the transport's watchdog cuts it short and it is retried like a
timeout, so a server that drips a byte a second costs at most ``retry.attempts`` timeouts, while
a slow but honest link is never cut off. An edit's downloads together obey the same rule with
one operation's retry budget as grace (:class:`NetworkBudget`). Cancelling, the transport closing
and the edit's deadline are final, not retried.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol

from sakura.edge_client._http.connections import CLOSED
from sakura.edge_client.errors import EdgeError, EditCancelled, TransportError

#: Below 64 kbit/s (GPRS-class 2G) no edit completes in useful time: an estimate, the floor
#: under which an operation counts as stalled. Real links dip lower for a while; ``timeout_s``
#: of grace absorbs that.
MIN_USEFUL_RATE = 8_000.0
#: How often :class:`EitherFlag` looks at its second flag while it waits on the first.
_EITHER_POLL_S = 0.05
STALLED = "stalled"  # an attempt fell behind the minimum useful rate (retried, unlike the other reasons)


class CancelFlag(Protocol):
    """What cancels an operation: a ``threading.Event``, or any flag with its two reads."""

    def is_set(self) -> bool: ...

    def wait(self, timeout: float) -> bool: ...


class Retryable(Exception):
    """An attempt failed in a way another attempt may not (5xx, a stall, a bad range)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class NetworkBudget:
    """The per-edit deadline: an edit's downloads may keep the link busy for ``grace_s`` (the
    retry budget of one operation) plus the time their bytes take at the minimum useful rate.
    Time with nothing in flight (the phone computing) does not count, so slow phones are not
    penalised; a server that serves every shard just fast enough, or fails each a few times,
    still cannot hold an edit longer."""

    def __init__(self, grace_s: float, min_rate: float) -> None:
        self.grace_s, self.min_rate = grace_s, min_rate
        self._busy_s, self._since, self._active, self._bytes = 0.0, 0.0, 0, 0
        self._lock = threading.Lock()

    @property
    def active(self) -> int:
        return self._active

    def add(self, nbytes: int) -> None:
        with self._lock:
            self._bytes += nbytes

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        with self._lock:
            if self._active == 0:
                self._since = time.monotonic()
            self._active += 1
        try:
            yield
        finally:
            with self._lock:
                self._active -= 1
                if self._active == 0:
                    self._busy_s += time.monotonic() - self._since

    def expired(self) -> bool:
        with self._lock:
            busy = self._busy_s + (time.monotonic() - self._since if self._active else 0.0)
            return busy > self.grace_s + self._bytes / self.min_rate


class Operation:
    """One document or shard across all its attempts: the progress it must keep up, and what
    stops it (the watchdog asks :meth:`check`)."""

    def __init__(self, what: str, *, timeout_s: float, min_rate: float, cancel: CancelFlag | None,
                 budget: NetworkBudget | None, closed: Callable[[], bool]) -> None:
        self.what, self.timeout_s, self.min_rate = what, timeout_s, min_rate
        self.cancel, self.budget, self.closed = cancel, budget, closed
        self.start = time.monotonic()
        self.received = 0
        self.attempts = 0

    def begin_attempt(self) -> None:
        self.attempts += 1

    def deadline(self) -> float:
        """Downloads in flight together share the link: each must get its share of the rate."""
        share = max(1, self.budget.active) if self.budget is not None else 1
        return self.start + max(1, self.attempts) * self.timeout_s + self.received * share / self.min_rate

    def got(self, nbytes: int) -> None:
        self.received += nbytes
        if self.budget is not None:
            self.budget.add(nbytes)

    def check(self) -> str | None:
        if self.closed():
            return CLOSED
        if self.cancel is not None and self.cancel.is_set():
            return "cancelled"
        if time.monotonic() > self.deadline():
            return STALLED
        if self.budget is not None and self.budget.expired():
            return "edit deadline"
        return None

    def stop_if_needed(self) -> None:
        """Raise if the operation must stop: a typed error, or a retryable stall."""
        reason = self.check()
        if reason == STALLED:
            raise Retryable(str(self.error(reason)))
        if reason is not None:
            raise self.error(reason)

    def error(self, reason: str) -> EdgeError:
        if reason == "cancelled":
            return EditCancelled("the edit was cancelled")
        if reason == CLOSED:
            return TransportError(f"{self.what}: the transport was closed")
        elapsed = time.monotonic() - self.start
        if reason == "edit deadline":
            assert self.budget is not None  # only a budget's expiry gives this reason
            return TransportError(f"{self.what}: the edit's downloads ran past their deadline "
                                  f"({self.budget.grace_s:g} s, plus a second per {self.min_rate:.0f} bytes received)")
        return TransportError(f"{self.what}: too slow: {self.received} bytes in {elapsed:.1f} s, below "
                              f"{self.min_rate:.0f} bytes/s after {self.timeout_s:g} s")


class EitherFlag:
    """Set when either event is (the transport's view of cancellation)."""

    def __init__(self, a: CancelFlag, b: CancelFlag) -> None:
        self.a, self.b = a, b

    def is_set(self) -> bool:
        return self.a.is_set() or self.b.is_set()

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.a.wait(min(left, _EITHER_POLL_S))
        return True
