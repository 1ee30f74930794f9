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

The prediction decides how long the model waits, not whether it waits at all
(:func:`computes_instead`, ski rental with a prediction): judged later than computing, the phone
computes once it has waited half the compute time; judged sooner, it waits at most twice the
compute time. Where even its soonest end (its round trip, then its decode) is later than
computing would end, the phone computes at once: that part is no prediction. Trusted outright, a
download judged in a dip (its mean rate since its first byte) had the phone compute a whole
step's pass, 2.8 s, where the link came back and the download ended 0.7 s later (SD3.5 on a 5G
walk); and a download crawling near its end, whose mean still promised it soon, kept the model
waiting many times the compute time.

While the model waits, the phone would idle. Where the template pass it began is below the shard
waited for (the model took fetched shards past the pass's frontier), it runs the pass one block on
(:func:`climbs`) while that block is predicted to end before the download is decoded: predicted
right, it costs nothing, and each block it runs makes computing a shard instead a block cheaper.
Without it, a link that slowed after the model had taken the fetched shards above the phone's
prefix stranded the phone: klein 4B on a 4G walk waited 5-8 s for each of its last five shards
where computing one from the frontier meant running nine blocks first (91 s, the phone alone 75 s).
It starts a pass not begun (fetched whole so far) only where the rest of the pass, every later
shard at its fewest bytes, is predicted to be fetched later than the whole pass computed from its
start, and once the model has waited :data:`TRUST` times the pass's first block: that block, the
source's preparation with it, is what starting commits to (a block cannot be given up halfway), so
this is the rent-or-buy rule again. Without it, klein 4B on a flagship NPU fetched a whole pass, the
link slowed to 150 ms a shard where a block costs 16 ms, and the phone idled through every wait
(4.5 s, the phone alone 3.1 s). Judged on the shard waited for alone, a dip at a pass's last shard
had a GPU phone start one, 5 s, where the download ended in 1.5; started at once rather than after
the wait, a 1.3 s outage on a 5G drive cost 5.3 s.

One rule, two users: the live compute stage (:mod:`sakura.edge_client._streaming_kv`) and the
simulator (:mod:`sakura.evaluation.simulator`), which replays it on a bandwidth trace.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["LATE_CHECK_S", "TRUST", "Due", "Waiting", "climbs", "computes_instead", "fetch_due", "judge_download",
           "next_check", "soonest_due"]

#: How often a model waiting for a download re-judges it (the compute stage's poll; an estimate).
LATE_CHECK_S = 0.05


#: How far the rule trusts its prediction of a late download (Purohit, Svitkina and Kumar,
#: "Improving Online Algorithms via ML Predictions", NeurIPS 2018, ski rental with a prediction):
#: predicted later than computing, the phone computes once it has waited ``TRUST`` times the
#: compute time; predicted sooner, it waits at most the compute time over ``TRUST``. At 0.5 the
#: rule is within 1.5x of the better choice when the prediction is right and 3x when it is wrong
#: (an estimate of the balance, not fitted to a figure).
TRUST = 0.5


class Due(NamedTuple):
    """When a download would be decoded, judged now: ``expected`` (:func:`fetch_due`) and
    ``soonest`` (:func:`soonest_due`, what no link could beat); ``pass_end``: when the last shard
    of its pass would be, every later one fetched after it at its fewest bytes (:func:`judge_download`)."""

    expected: float
    soonest: float
    pass_end: float


def computes_instead(due: Due, now: float, *, waited: float, compute_s: float) -> bool:
    """Compute a late download's shard instead (``compute_s`` from the frontier through it), the
    model having waited ``waited`` for it. Where even its soonest end (its round trip, then its
    decode) is later than computing would end, at once: that part of the judgement is no
    prediction."""
    if due.soonest > now + compute_s:
        return True
    if due.expected > now + compute_s:
        return waited >= TRUST * compute_s
    return waited >= compute_s / TRUST


def next_check(now: float, *, asked: float, compute_s: float, block_s: float | None = None) -> float:
    """When a model waiting since ``asked`` re-judges its download next: :data:`LATE_CHECK_S` on,
    or sooner where a wait of the rule runs out first (:func:`computes_instead` with ``compute_s``;
    :func:`climbs` with ``block_s``, the first block of a pass not begun), which changes its
    verdict on the same prediction. A poll alone made every wait at least a check: on a flagship
    NPU, where a block costs 16 ms, a phone computing its way past a stalled link waited 50 ms for
    each block where the rule says 8 (klein 4B over a 5G drive: 23 blocks)."""
    waits = [TRUST * compute_s, compute_s / TRUST]
    if block_s is not None:
        waits.append(TRUST * block_s)
    ends = [asked + wait + 1e-9 for wait in waits if asked + wait + 1e-9 > now]  # just past: float sums
    return min([now + LATE_CHECK_S, *ends])


def climbs(due: Due, now: float, *, block_s: float, begun: bool = True, waited: float = 0.0,
           pass_s: float = 0.0) -> bool:
    """Run the template pass one block on (``block_s``, its frontier below the shard the model
    waits for) while the download is predicted to be decoded no sooner than that block would end:
    no wait longer than the download's, unless the prediction is wrong by up to a block. A pass not
    ``begun`` starts only where the rest of it is predicted to be fetched later than computing it
    all (``pass_s``) would end, once the model has ``waited`` :data:`TRUST` times its first block."""
    if due.expected < now + block_s:
        return False
    return begun or (due.pass_end >= now + pass_s and waited >= TRUST * block_s)


def soonest_due(now: float, *, requested_at: float | None, rtt_s: float, decode_s: float) -> float:
    """The soonest a download could be decoded: no byte comes sooner than a round trip after its
    request (a whole one if it was not requested yet), then its decode."""
    wait = rtt_s if requested_at is None else max(0.0, requested_at + rtt_s - now)
    return now + wait + decode_s


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
    soonest = soonest_due(now, requested_at=requested_at, rtt_s=rtt_s, decode_s=decode_s)
    return soonest if left <= 0 else soonest + stalled + left / rate


def judge_download(now: float, *, requested_at: float | None, rtt_s: float, planned_rate: float, received: int,
                   left: int, later: int, decode_s: float, waiting: Waiting | None = None) -> Due:
    """A late download's :class:`Due` (:func:`fetch_due`, :func:`soonest_due`); ``later``: the
    fewest bytes the shards after it in its pass can still come in, which follow it on the link."""
    def due(nbytes: int) -> float:
        return fetch_due(now, requested_at=requested_at, rtt_s=rtt_s, planned_rate=planned_rate,
                         received=received, left=nbytes, decode_s=decode_s, waiting=waiting)

    return Due(due(left), soonest_due(now, requested_at=requested_at, rtt_s=rtt_s, decode_s=decode_s),
               due(left + later))
