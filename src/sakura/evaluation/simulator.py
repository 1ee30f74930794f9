"""A trace-driven discrete-event model of one edit, for every system of the comparison.

It replays what the live client does: fetch shards one after another over a link whose
capacity is a real bandwidth trace (each request sent one round trip before the previous
response ends, so only the first pays the round trip), decode each, and let the
model consume it when the layer that needs it starts. Policies are the edge client's own code
(:mod:`sakura.edge_client.policy`, :mod:`sakura.edge_client.oracle`), fed the same
:class:`~sakura.edge_client.planning.PlanContext` and the same :class:`BandwidthEstimator` the
live pipeline builds. Compute and decode times come from an :class:`EditGeometry` measured on a
real model.

Systems: ``sakura`` (robust MPC + overlapped pipeline, with abandonment), ``sakura-no-pipeline``,
``sakura-fixed-medium``, ``full-sequential``, ``cachegen`` (its whole ladder), ``cachegen-matched``
(only CacheGen configurations whose output is at least as faithful as SAKURA's smallest level:
the comparison at preserved quality), ``on-device``, ``oracle`` and the ``bound``. The bounded stage queues of the live pipeline are not modelled (at six shards the
fetcher never waits on them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sakura.edge_client import BandwidthEstimator, FixedPolicy, LevelPolicy, OraclePolicy, PlanContext, RobustMPCPolicy, ShardOption
from sakura.edge_client.planning import level_utility, normalised_weights
from sakura.evaluation.geometry import EditGeometry
from sakura.platform.traces import BandwidthTrace

ABANDON_CHECK_S, ABANDON_MIN_S = 0.02, 0.05
MAX_IN_FLIGHT = 4  # as the live pipeline
SYSTEMS = ("sakura", "sakura-no-pipeline", "sakura-fixed-medium", "full-sequential", "cachegen", "cachegen-matched",
           "on-device", "oracle")


@dataclass
class SimShard:
    index: int
    level: str
    requested: float
    first_byte: float
    arrived: float
    decode_start: float = 0.0
    decoded: float = 0.0
    needed: float = 0.0
    consumed: float = 0.0
    bytes: int = 0
    abandoned: list[str] = field(default_factory=list)
    bytes_final: int = 0  # of the level finally fetched
    expected_rate: float | None = None  # the estimate when it was requested


@dataclass
class SimEdit:
    system: str
    latency_s: float
    shards: list[SimShard]
    compute_start: float = 0.0
    stall_s: float = 0.0

    @property
    def levels(self) -> tuple[str, ...]:
        return tuple(s.level for s in self.shards)

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.shards)


class EditSimulator:
    """One edit of ``geometry`` starting ``start`` seconds into ``trace``."""

    def __init__(self, geometry: EditGeometry, trace: BandwidthTrace, start: float, *, rtt_s: float = 0.04,
                 cold: bool = False, cachegen_floor: str | None = None) -> None:
        """``cold``: a fresh session (no bandwidth samples, no compute calibration) instead of a
        phone that has used the link for the last seconds and has edited before."""
        self.g, self.trace, self.start, self.rtt, self.cold = geometry, trace, start, rtt_s, cold
        self.cachegen_floor = cachegen_floor or geometry.cachegen_levels[0]
        self.n = geometry.shards
        self._utility = level_utility({lv: sum(geometry.sizes[lv]) for lv in geometry.levels})
        self._weights = normalised_weights(geometry.weights)
        self._mean_decode = {lv: sum(geometry.decode_s[lv]) / self.n for lv in geometry.levels}
        self._options = tuple(ShardOption({lv: geometry.sizes[lv][j] for lv in geometry.levels}, self._weights[j])
                              for j in range(self.n))

    # -- the link ------------------------------------------------------------------------
    def transfer(self, at: float, nbytes: int) -> float:
        return self.trace.transfer_time(self.start + at, nbytes)

    def delivered(self, t0: float, t1: float) -> float:
        return self.trace.bytes_between(self.start + t0, self.start + t1)

    def manifest_done(self) -> float:
        return self.rtt + self.transfer(self.rtt, self.g.manifest_bytes)

    def primed_estimator(self) -> BandwidthEstimator:
        """What a phone that used the link for the last three seconds would know (nothing if cold)."""
        est = BandwidthEstimator()
        if self.cold:
            return est
        for k in (3, 2, 1):
            est.observe(max(1, int(self.delivered(-k, -k + 1))), 1.0)
        est.observe_rtt(self.rtt)
        return est

    # -- systems -------------------------------------------------------------------------
    def run(self, system: str) -> SimEdit:
        if system == "sakura":
            return self.pipelined(RobustMPCPolicy(), system)
        if system == "sakura-fixed-medium":
            return self.pipelined(FixedPolicy(self.g.levels[len(self.g.levels) // 2]), system)
        if system == "oracle":
            return self.pipelined(OraclePolicy(self.trace, trace_time=lambda t: self.start + t), system, abandon=False)
        if system == "sakura-no-pipeline":
            return self.sequential(RobustMPCPolicy(), system)
        if system == "full-sequential":
            return self.sequential(FixedPolicy(self.g.levels[-1]), system)
        if system == "cachegen":
            return self.cachegen()
        if system == "cachegen-matched":
            ladder = self.g.cachegen_levels
            return self.cachegen(ladder[ladder.index(self.cachegen_floor):], system)
        if system == "on-device":
            return SimEdit(system, self.g.ondevice_s[1], [])
        raise ValueError(f"unknown system {system!r}")

    def bound(self) -> float:
        """No edit can beat computing alone, nor fetching the smallest level of every shard."""
        t = self.manifest_done()
        smallest = sum(self.g.sizes[self.g.levels[0]])
        return t + max(self.g.compute_s, self.transfer(t, smallest))

    def pipelined(self, policy: LevelPolicy, system: str, *, abandon: bool = True) -> SimEdit:
        est, t = self.primed_estimator(), self.manifest_done()
        shards: list[SimShard] = []
        request = link_free = decode_free = compute_start = t
        stall = 0.0
        for i in range(self.n):
            ctx = self._context(i, request, est, shards, compute_start, decode_free, link_free)
            shard = self._fetch(i, policy.choose(ctx), request, link_free, est, policy if abandon else None, shards,
                                compute_start)
            shard.decode_start = max(shard.arrived, decode_free)
            shard.decoded = decode_free = shard.decode_start + self.g.decode_s[shard.level][i]
            shard.needed = compute_start + self.g.startup_s if i == 0 else shards[-1].consumed + self.g.gaps_s[i - 1]
            shard.consumed = max(shard.decoded, shard.needed)
            stall += shard.consumed - shard.needed
            shards.append(shard)
            link_free, request = shard.arrived, self._next_request(shards)
        return SimEdit(system, shards[-1].consumed + self.g.gaps_s[-1], shards, compute_start, stall)

    def sequential(self, policy: LevelPolicy, system: str) -> SimEdit:
        """Fetch everything (levels chosen as the pipelined client would), decode it, then compute."""
        est, t = self.primed_estimator(), self.manifest_done()
        shards: list[SimShard] = []
        request = link_free = t
        for i in range(self.n):
            ctx = self._context(i, request, est, [], t, request, link_free)
            shard = self._fetch(i, policy.choose(ctx), request, link_free, est, None, [], t)
            shards.append(shard)
            link_free, request = shard.arrived, self._next_request(shards)
        return self._decode_then_compute(system, shards, link_free)

    def cachegen(self, ladder: list[str] | None = None, system: str = "cachegen") -> SimEdit:
        """CacheGen adapted to DiT: per chunk (shard) the finest configuration whose transfer at the
        last measured throughput fits an equal share of the remaining deadline (the compute-only
        edit time, the budget SAKURA hides its download in); decode streams with the fetch; the
        model starts when everything is decoded."""
        est, t = self.primed_estimator(), self.manifest_done()
        throughput = est.estimate().bytes_per_s  # type: ignore[union-attr]
        deadline = t + self.g.compute_s
        shards: list[SimShard] = []
        request = link_free = decode_free = t
        for i in range(self.n):
            share = max(0.0, deadline - max(request + self.rtt, link_free)) / (self.n - i)
            ladder = ladder or self.g.cachegen_levels
            fitting = [lv for lv in ladder if self.g.sizes[lv][i] / throughput <= share]
            level = fitting[-1] if fitting else ladder[0]
            shard = self._fetch(i, level, request, link_free, None, None, [], t)
            shard.expected_rate = throughput
            throughput = shard.bytes / max(shard.arrived - shard.first_byte, 1e-6)
            shard.decode_start = max(shard.arrived, decode_free)
            shard.decoded = decode_free = shard.decode_start + self.g.decode_s[level][i]
            shards.append(shard)
            link_free, request = shard.arrived, self._next_request(shards)
        return self._compute_after(shards, system, decode_free)

    # -- mechanics -----------------------------------------------------------------------
    def _next_request(self, shards: list[SimShard]) -> float:
        """When the client sends the next request: a round trip before the last response ends, as
        predicted at request time from the bandwidth estimate (the live fetcher's timer), or at
        the latest when that response is complete; never with more than ``MAX_IN_FLIGHT`` out."""
        shard = shards[-1]
        rate = shard.expected_rate
        if rate is None:
            return shard.arrived
        ideal = shard.arrived - self.rtt
        window = shards[-MAX_IN_FLIGHT].arrived if len(shards) >= MAX_IN_FLIGHT else 0.0
        return max(window, min(shard.arrived, max(ideal, shard.requested + shard.bytes_final / rate)))

    def _decode_then_compute(self, system: str, shards: list[SimShard], t: float) -> SimEdit:
        for shard in shards:
            shard.decode_start = t
            shard.decoded = t = t + self.g.decode_s[shard.level][shard.index]
        return self._compute_after(shards, system, t)

    def _compute_after(self, shards: list[SimShard], system: str, t: float) -> SimEdit:
        shards[0].needed = shards[0].consumed = t + self.g.startup_s
        for prev, shard in zip(shards, shards[1:]):
            shard.needed = shard.consumed = prev.consumed + self.g.gaps_s[prev.index]
        return SimEdit(system, shards[-1].consumed + self.g.gaps_s[-1], shards, t)

    def _fetch(self, i: int, level: str, t: float, link_free: float, est: BandwidthEstimator | None,
               policy: LevelPolicy | None, consumed: list[SimShard], compute_start: float) -> SimShard:
        """Request shard ``i`` at ``t``; its bytes flow once the link is free and a round trip passed."""
        shard = SimShard(i, level, requested=t, first_byte=max(t + self.rtt, link_free), arrived=0.0)
        estimate = est.estimate() if est is not None else None
        while True:
            begin = max(t + self.rtt, link_free)
            size = self.g.sizes[level][i]
            arrival = begin + self.transfer(begin, size)
            switch = self._abandon_point(i, level, begin, arrival, est, policy, consumed, compute_start)
            if switch is None:
                break
            at, received, smaller = switch
            shard.abandoned.append(level)
            shard.bytes += received
            est.observe(received, at - begin)  # type: ignore[union-attr]
            t, link_free, level = at, at, smaller
        shard.level, shard.arrived, shard.first_byte = level, arrival, begin
        shard.requested, shard.bytes_final = t, size
        shard.expected_rate = estimate.bytes_per_s if estimate is not None else None
        shard.bytes += size
        if est is not None:
            est.observe_rtt(begin - t)
            est.observe(size, max(arrival - begin, 1e-6))
        return shard

    def _abandon_point(self, i, level, begin, arrival, est, policy, consumed, compute_start):
        if policy is None or est is None or arrival - begin <= ABANDON_MIN_S:
            return None
        size, at = self.g.sizes[level][i], begin + ABANDON_MIN_S
        while at < arrival:
            received = int(min(size, self.delivered(begin, at)))
            ctx = self._context(i, at, est, [s for s in consumed if s.consumed <= at], compute_start, at, arrival)
            smaller = policy.abandon(ctx, level, received, received / (at - begin))
            if smaller is not None and smaller != level:
                return at, received, smaller
            at += ABANDON_CHECK_S
        return None

    def _context(self, i: int, now: float, est: BandwidthEstimator, done: list[SimShard], compute_start: float,
                 decode_free: float, link_free: float) -> PlanContext:
        g = self.g
        startup, gaps = g.startup_s, list(g.gaps_s)
        if self.cold:  # a fresh session learns compute times as the model asks for shards
            asked = {s.index for s in done if s.needed <= now}
            startup = startup if 0 in asked else 0.0
            gaps = [gap if j + 1 in asked else 0.0 for j, gap in enumerate(gaps)]
        known = [s for s in done if s.consumed <= now]
        if known:
            ready = known[-1].consumed + sum(gaps[known[-1].index:i])
        else:
            ready = compute_start + startup + sum(gaps[:i])
        return PlanContext(
            now=now, index=i, levels=tuple(g.levels),
            shards=self._options,
            utility=self._utility, estimate=est.estimate(), rtt_s=est.rtt_s, compute=tuple(gaps),
            decode_s=self._mean_decode, ready_at=ready, decode_free_at=decode_free, link_free_at=link_free)
