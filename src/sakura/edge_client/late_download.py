"""The compute stage's rule for a late download (the *extend* rule).

When the model asks for a fetched shard that is not decoded yet and the phone can compute it (it
is at the frontier of the template pass), the compute stage computes it instead once its download
would be decoded later than computing it (every block from the frontier through it) would end;
the download is abandoned. The rule is re-judged every :data:`LATE_CHECK_S` while the model waits,
because a download that started well may stall: its rate is the slowest of the one planned with,
its mean since its first byte could come, and, once the model has waited a round trip, the rate its
bytes came at while the model waited. The last matters when a download most of the way in stops:
its mean since the request decays only as ``1/t``, so with a few kB left it kept promising the
rest within a block's compute while the link delivered nothing (a 5G trace: the model waited 3.2 s
for 96 kB where computing the blocks from the frontier cost 0.4 s).

One rule, two users: the live compute stage (:mod:`sakura.edge_client._streaming_kv`) and the
simulator (:mod:`sakura.evaluation.simulator`), which replays it on a bandwidth trace.
"""

from __future__ import annotations

import math
from typing import NamedTuple

__all__ = ["LATE_CHECK_S", "Waiting", "fetch_due"]

#: How often a model waiting for a download re-judges it (the compute stage's poll; an estimate).
LATE_CHECK_S = 0.05


class Waiting(NamedTuple):
    """Since when the model waits for the shard, and how many of its bytes had arrived then."""

    since: float
    received: int


def fetch_due(now: float, *, requested_at: float | None, rtt_s: float, planned_rate: float, received: int,
              left: int, decode_s: float, waiting: Waiting | None = None) -> float:
    """When a fetched shard would be decoded, judged at ``now``: its ``left`` bytes still to come
    (``received`` arrived) at ``planned_rate`` bytes/s or, once a round trip has passed since
    ``requested_at``, at the rate the download arrives at if that is slower: its mean so far, and
    its rate since the model began ``waiting`` once that is a round trip (or a check) old; a round
    trip first if it was not requested yet; then ``decode_s``. ``inf`` for a download that
    delivered nothing while the model waited."""
    rate = planned_rate
    if requested_at is not None and now - requested_at > rtt_s:
        rate = min(rate, max(received, 1) / (now - requested_at - rtt_s))  # its mean so far
        # (fewer bytes than when the wait began: it restarted at another level, and has no such rate)
        if waiting is not None and received >= waiting.received:
            since = max(waiting.since, requested_at + rtt_s)  # no byte can come sooner
            if now - since >= max(rtt_s, LATE_CHECK_S):
                rate = min(rate, (received - waiting.received) / (now - since))  # while the model waited
    wait = 0.0 if requested_at is not None else rtt_s
    if left <= 0:
        return now + wait + decode_s
    return now + wait + left / rate + decode_s if rate > 0 else math.inf
