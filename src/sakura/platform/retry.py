"""One retry policy for everything that goes over a network: the object stores and the phone's
HTTP transport."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` tries in all; between them, exponential backoff from ``backoff_s`` capped at
    ``max_backoff_s``, with +-25% jitter so clients that failed together do not retry together."""

    attempts: int = 5
    backoff_s: float = 0.1
    max_backoff_s: float = 2.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.backoff_s < 0 or self.max_backoff_s < self.backoff_s:
            raise ValueError(f"a retry policy needs attempts >= 1 and 0 <= backoff_s <= max_backoff_s, not {self}")

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """The wait after failed attempt ``attempt`` (1-based); a server's ``Retry-After`` is
        honoured up to the cap."""
        base = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))
        if retry_after is not None:
            base = max(base, min(retry_after, self.max_backoff_s))
        return base * (0.75 + 0.5 * random.random())

    def delays(self) -> Iterator[float]:
        """The waits between the attempts, in order."""
        for attempt in range(1, self.attempts):
            yield self.delay(attempt)
