"""The compute stage's rule for a late download (the *extend* rule).

When the model asks for a fetched shard that is not decoded yet and the phone can compute it (it
is at the frontier of the template pass), the compute stage computes it instead once its download
would be decoded later than computing it (every block from the frontier through it) would end;
the download is abandoned. The rule is re-judged every :data:`LATE_CHECK_S` while the model waits,
because a download that started well may stall: its rate is the slower of the one planned with
and its mean since its first byte could come, once a byte has come (before that it has no rate of
its own: a first byte a little later than the smoothed round trip, from jitter or a request queued
behind another, once read as a rate of one byte a second and gave the download up at once, before
the rule below could judge it). A download that delivers nothing while the model
waits is expected to stall as long again as it has (the longer an outage has lasted, the longer it
is likely to last), so the phone computes once it has waited about as long as computing would take:
the rent-or-buy rule, never worse than twice the better choice made knowing the future. Without
it, a download most of the way in when the link died kept promising its last kilobytes within a
block's compute (its mean since the request decays only as ``1/t``): on a 5G trace the model
waited 3.2 s for 96 kB where computing the blocks from the frontier cost 0.4 s. Bytes that do
arrive while the model waits leave the judgement to the mean rate: a rate over a few checks is
too noisy to give up a download for (on a slow phone, a dip read as a crawl had it compute the
whole template pass, 30 s, for a download a second from done).

One rule, two users: the live compute stage (:mod:`sakura.edge_client._streaming_kv`) and the
simulator (:mod:`sakura.evaluation.simulator`), which replays it on a bandwidth trace.
"""

from __future__ import annotations

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
    ``requested_at`` and a byte has come, at its mean rate so far if that is slower; no byte comes
    sooner than a round trip after its request (a whole one if it was not requested yet); then
    ``decode_s``. A download that delivered nothing since the model began
    ``waiting`` (a round trip or a check ago at least) is expected to stall as long again first."""
    rate, stalled = planned_rate, 0.0
    if requested_at is not None and now - requested_at > rtt_s:
        if received:  # no byte yet is no rate yet: the stall rule below judges a download that never starts
            rate = min(rate, received / (now - requested_at - rtt_s))  # its mean so far
        if waiting is not None and received == waiting.received:
            since = max(waiting.since, requested_at + rtt_s)  # no byte can come sooner
            if now - since >= max(rtt_s, LATE_CHECK_S):
                stalled = now - since  # nothing came while the model waited: as long again, then its mean
    wait = rtt_s if requested_at is None else max(0.0, requested_at + rtt_s - now)
    if left <= 0:
        return now + wait + decode_s
    return now + wait + stalled + left / rate + decode_s
