"""The link of a simulated edit: a real bandwidth trace, one round trip a request, and the live
fetcher's mechanics on it (its near-done timer, mid-download abandonment), with the
:class:`~sakura.edge_client.planning.PlanContext` the live pipeline's policy would see
(:class:`~sakura.evaluation.simulator.EditSimulator`)."""

from __future__ import annotations

from bisect import bisect_right, insort
from collections.abc import Collection, Iterable, Sequence
from typing import NamedTuple

from sakura.edge_client import LevelPolicy, PlanContext
from sakura.edge_client.estimator import BandwidthEstimator
from sakura.edge_client.planning import (
    ABANDON_CHECK_S,
    ABANDON_MIN_S,
    ShardOption,
    level_utility,
    normalised_weights,
    plan_context,
    stage_window,
)
from sakura.edge_client.timeline import ShardTiming
from sakura.emulation.traces import BandwidthTrace
from sakura.evaluation.geometry import EditGeometry
from sakura.evaluation.sim_estimator import TimedEstimator
from sakura.evaluation.sim_model import consumed

__all__ = ["SimulatedLink", "arrived", "first_byte"]


def arrived(shard: ShardTiming) -> float:
    """When the last byte of a fetched shard arrived (set once it is requested)."""
    assert shard.arrived_at is not None, f"shard {shard.index} was not fetched"
    return shard.arrived_at


def first_byte(shard: ShardTiming) -> float:
    """When the first byte of a fetched shard arrived (set once it is requested)."""
    assert shard.first_byte_at is not None, f"shard {shard.index} was not fetched"
    return shard.first_byte_at


class _Attempt(NamedTuple):
    """One request the simulated link carried: a shard at the level it was asked for then (a
    download abandoned for a smaller level is an attempt of its own)."""

    shard: int
    asked: float
    begin: float  # its first byte
    until: float  # its last byte, or when it was abandoned
    length: int


def _ends(attempt: _Attempt) -> float:
    return attempt.until


class SimulatedLink:
    """Edits of ``geometry`` over ``trace`` from ``start`` seconds into it; ``cold``: a fresh
    session (no bandwidth samples, no compute calibration); ``warm_template``: the template's
    manifest and context objects are on the phone."""

    def __init__(self, geometry: EditGeometry, trace: BandwidthTrace, start: float, *, rtt_s: float,
                 cold: bool, warm_template: bool) -> None:
        self.g, self.trace, self.start, self.rtt, self.cold = geometry, trace, start, rtt_s, cold
        self.warm_template = warm_template
        n = geometry.shards
        self.window = stage_window(n, one_pass=geometry.kv_cached)  # the live pipeline's queue depth
        self._utility = level_utility({lv: sum(geometry.sizes[lv]) for lv in geometry.levels})
        weights = normalised_weights(geometry.weights)
        self.mean_decode = {lv: sum(geometry.decode_s[lv]) / n for lv in geometry.levels}
        #: Each shard as a policy sees it (its bytes per level, its weight).
        self.shard_options = tuple(ShardOption({lv: geometry.sizes[lv][j] for lv in geometry.levels}, weights[j])
                                   for j in range(n))
        #: Per shard of the edit being simulated: when the live fetcher's near-done timer fires
        #: (its request plus its bytes at the rate expected then; None without an estimate).
        self._timers: dict[int, float | None] = {}
        #: Every request of the edit, in the order the link ends them (the fetcher decides its
        #: abandonment at once, so a request is recorded at the level it had when it was asked for).
        self._attempts: list[_Attempt] = []

    def reset(self) -> None:
        """A new edit starts."""
        self._timers.clear()
        self._attempts.clear()

    def transfer(self, at: float, nbytes: int) -> float:
        return self.trace.transfer_time(self.start + at, nbytes)

    def delivered(self, t0: float, t1: float) -> float:
        return self.trace.bytes_between(self.start + t0, self.start + t1)

    def fetched(self, at: float, nbytes: int) -> float:
        """When one request sent at ``at`` for ``nbytes`` is complete (nothing else on the link)."""
        return at + self.rtt + self.transfer(at + self.rtt, nbytes) if nbytes else at

    def preamble_done(self, context_bytes: int | None = None, *, hashed: bool = True) -> float:
        """When the KV can be requested: cold, once one response brought the manifest and the
        objects bundled with it (the live client's preamble request); warm, at once."""
        return self.fetched(0.0, self.preamble_bytes(context_bytes, hashed=hashed))

    def preamble_bytes(self, context_bytes: int | None = None, *, hashed: bool = True) -> int:
        """The preamble response's bytes: the manifest (without its shards' sha256s unless
        ``hashed``) and the objects bundled with it (0 warm)."""
        if self.warm_template:
            return 0
        manifest = self.g.manifest_bytes if hashed else self.g.unhashed_manifest_bytes
        return manifest + (self.g.context_bytes if context_bytes is None else context_bytes)

    def primed_estimator(self) -> TimedEstimator:
        """What a phone that used the link for the last three seconds would know (nothing if cold):
        a transfer a second, ending as its second ends. A second without a byte completes no
        transfer: its silence belongs to the transfer that spans it, observed when that one ends
        (and not at all if the silence runs to the start). Observed as one byte in a second, a
        silence just before the start set the estimator's error at hundreds of thousands, and the
        phone judged every block to be cheaper computed for the next 37 s (klein 4B on the
        flagship GPU, out of an outage on a 4G drive: 1.64 of fetching every block)."""
        est = BandwidthEstimator(clock=None)  # simulated time: every caller passes its own
        if self.cold:
            return TimedEstimator(est)
        began = -3.0
        for end in (-2.0, -1.0, 0.0):
            nbytes = int(self.delivered(end - 1.0, end))
            if nbytes > 0:
                est.observe(nbytes, end - began, at=end)
                began = end
        est.observe_rtt(self.rtt)
        return TimedEstimator(est)

    def near_done(self, shard: ShardTiming) -> float:
        """When the live fetcher deems ``shard``'s response near done: a round trip before it ends,
        as predicted at request time from the bandwidth estimate (its timer) or measured from its own
        progress, whichever comes first; requested without an estimate, at its first byte."""
        timer = self._timers.get(shard.index)
        if timer is None:
            return first_byte(shard)
        return min(arrived(shard), timer, max(first_byte(shard), arrived(shard) - self.rtt))

    def received(self, shard: ShardTiming, at: float) -> int:
        """Bytes of ``shard``'s download in by ``at``: they flow from its first byte on."""
        return self._received(first_byte(shard), self.g.sizes[shard.level][shard.index], at)

    def _received(self, begin: float, length: int, at: float) -> int:
        return int(min(length, self.delivered(begin, at))) if at > begin else 0

    def in_flight(self, at: float, exclude: Collection[int] = ()) -> list[tuple[float, int, int]]:
        """The downloads in flight at ``at`` as the live fetcher knows them
        (``ShardFetcher.in_flight``): asked for by then and not yet ended, in the order asked,
        each ``(asked_at, received, length)``, except shards ``exclude``. The requests are kept
        sorted by when they end, so those not ended by ``at`` are the tail from the first that ends
        after it."""
        first = bisect_right(self._attempts, at, key=_ends)
        return [(a.asked, self._received(a.begin, a.length, at), a.length)
                for a in sorted(self._attempts[first:], key=lambda a: a.asked)
                if a.asked <= at and a.shard not in exclude]

    def fetch(self, i: int, level: str, t: float, link_free: float, est: TimedEstimator | None,
               policy: LevelPolicy | None, consumed: list[ShardTiming], compute_start: float,
               rate: float | None = None) -> ShardTiming:
        """Request shard ``i`` at ``t``; its bytes flow once the link is free and a round trip passed.
        ``rate``: the throughput the request expects when there is no estimator."""
        shard = ShardTiming(i, level=level, chosen_at=t, requested_at=t)
        estimate = est.estimate(t) if est is not None else None
        timer_rate = estimate.point_bytes_per_s if estimate is not None else rate
        while True:
            begin = max(t + self.rtt, link_free)
            size = self.g.sizes[level][i]
            arrival = begin + self.transfer(begin, size)
            switch = self._abandon_point(i, level, t, begin, arrival, est, policy, consumed, compute_start)
            if switch is None:
                break
            at, received, smaller = switch
            self._record(_Attempt(i, t, begin, at, size))
            shard.abandoned.append(level)
            shard.bytes += received
            est.observe(received, at - begin, at=at)  # type: ignore[union-attr]
            t, link_free, level = at, at, smaller
        self._record(_Attempt(i, t, begin, arrival, size))
        shard.level, shard.arrived_at, shard.first_byte_at = level, arrival, begin
        shard.bytes += size
        shard.attempts = 1
        if timer_rate is not None:  # the live fetcher's timer: behind what is still to come of those in flight
            ahead = self.delivered(t, link_free) if link_free > t else 0.0
            self._timers[i] = t + max(self.rtt, ahead / timer_rate) + size / timer_rate - self.rtt
        else:
            self._timers[i] = None
        if est is not None:  # the live fetcher learns both when the response ends
            if link_free <= t:  # it times the round trip only with nothing else on the link
                est.observe_rtt(begin - t, at=arrival)
            est.observe(size, max(arrival - begin, 1e-6), at=arrival)
        return shard

    def _record(self, attempt: _Attempt) -> None:
        insort(self._attempts, attempt, key=_ends)

    def _abandon_point(self, i: int, level: str, asked: float, begin: float, arrival: float,
                       est: TimedEstimator | None, policy: LevelPolicy | None, consumed: list[ShardTiming],
                       compute_start: float) -> tuple[float, int, str] | None:
        """Where the live fetcher would abandon shard ``i``'s download at ``level`` (asked for at
        ``asked``) for a smaller level: when, its bytes in by then, and the level. The downloads
        asked before it ended before its first byte; those asked after it are not simulated yet,
        so the policy is told of this one alone."""
        if policy is None or est is None or arrival - begin <= ABANDON_MIN_S or level == self.g.levels[0]:
            return None  # a policy abandons for a smaller level: there is none below the smallest
        size, at = self.g.sizes[level][i], begin + ABANDON_MIN_S
        while at < arrival:
            received = self._received(begin, size, at)
            done = [s for s in consumed if s.consumed_at is not None and s.consumed_at <= at]
            ctx = self.context(i, at, est, done, compute_start, at, [(asked, received, size)])
            smaller = policy.abandon(ctx, level, received, received / (at - begin))
            if smaller is not None and smaller != level:
                return at, received, smaller
            at += ABANDON_CHECK_S
        return None

    def context(self, i: int, now: float, est: TimedEstimator, done: list[ShardTiming], compute_start: float,
                 decode_free: float, downloads: Iterable[tuple[float, int, int]], can_compute: bool = False,
                left: Sequence[ShardTiming] = (), hashes_bytes: int = 0,
                template_compute: tuple[float, ...] = (), ahead: Sequence[int] = ()) -> PlanContext:
        """What the live pipeline's policy would know at ``now`` (``done``: the shards consumed so
        far; ``left``: those left to the phone it has not reached yet; ``ahead``: those
        requested from the top while a fresh phone timed its first block; ``hashes_bytes``: the shard
        hashes object, while the first fetched shard still waits for it; ``template_compute``:
        what the phone knows its template blocks cost, when it may compute; ``downloads``: those in
        flight, :meth:`in_flight`)."""
        g = self.g
        startup, gaps = g.startup_s, list(g.gaps_s)
        if self.cold:  # a fresh session learns compute times as the model asks for shards
            asked = {s.index for s in done if s.needed_at is not None and s.needed_at <= now}
            startup = startup if 0 in asked else 0.0
            gaps = [gap if j + 1 in asked else 0.0 for j, gap in enumerate(gaps)]
        known = [s for s in done if s.consumed_at is not None and s.consumed_at <= now]
        last = (known[-1].index, consumed(known[-1])) if known else None
        return plan_context(now, i, levels=g.levels, shards=self.shard_options, utility=self._utility,
                            estimate=est.estimate(now), rtt_s=est.rtt_s(now), compute=gaps, startup=startup,
                            decode_s=self.mean_decode, compute_start=compute_start, last_consumed=last,
                            decode_free_at=decode_free, downloads=downloads,
                            template_compute=template_compute,
                            computed=[s.index for s in (*done, *left) if s.computed], ahead=ahead,
                            pass_shards=self.g.shards_per_step, can_compute=can_compute, hashes_bytes=hashes_bytes,
                            window=self.window)
