"""The compute stage's rule for a late download (the *extend* rule).

When the model asks for a fetched shard that is not decoded yet and the phone can compute it (it
is at the frontier of the template pass), the compute stage computes it instead once its download
would be decoded later than computing it (every block from the frontier through it) would end;
the download is abandoned. The rule is re-judged every :data:`LATE_CHECK_S` while the model waits,
because a download that started well may stall: its rate is the slower of the one planned with
and the one it arrives at now.

One rule, two users: the live compute stage (:mod:`sakura.edge_client._streaming_kv`) and the
simulator (:mod:`sakura.evaluation.simulator`), which replays it on a bandwidth trace.
"""

from __future__ import annotations

__all__ = ["LATE_CHECK_S", "fetch_due"]

#: How often a model waiting for a download re-judges it (the compute stage's poll; an estimate).
LATE_CHECK_S = 0.05


def fetch_due(now: float, *, requested_at: float | None, rtt_s: float, planned_rate: float, received: int,
              left: int, decode_s: float) -> float:
    """When a fetched shard would be decoded, judged at ``now``: its ``left`` bytes still to come
    (``received`` arrived) at ``planned_rate`` bytes/s or, once a round trip has passed since
    ``requested_at``, at the rate the download arrives at now if that is slower; a round trip
    first if it was not requested yet; then ``decode_s``."""
    rate = planned_rate
    if requested_at is not None and now - requested_at > rtt_s:
        rate = min(rate, max(received, 1) / (now - requested_at - rtt_s))  # as it goes now
    wait = 0.0 if requested_at is not None else rtt_s
    return now + wait + left / rate + decode_s
