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
``sakura-fixed-medium``, ``full-sequential``, ``cachegen`` (its whole ladder and its own rule, text
fallback included), ``cachegen-matched`` (only CacheGen configurations whose output is at least as
faithful as SAKURA's smallest level: the comparison at preserved quality), the on-device baselines
(``on-device``: the stock pipeline; ``on-device-uncached``: the reference tokens through every block
at every step; ``on-device-prepared``: prompt embeddings and reference latents downloaded, the
reference KV computed once), ``oracle`` and the ``bound``. The bounded stage queues of the live
pipeline are not modelled (at six shards the fetcher never waits on them).

Every system starts from the same state of the phone. *Cold* (the default): nothing of the
template is there; each fetches what it needs over the same link, one request a round trip
(SAKURA and CacheGen: the manifest, then the context objects, then the KV; CacheGen's context
also holds the reference latents its text fallback computes from; the on-device systems: the
template's image and prompt, or the prepared objects). *Warm*: the manifest and context objects
are on the phone from an earlier edit, the KV is not.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sakura.edge_client import BandwidthEstimator, FixedPolicy, LevelPolicy, OraclePolicy, PlanContext, RobustMPCPolicy, ShardOption
from sakura.edge_client.fetcher import ABANDON_CHECK_S, ABANDON_MIN_S
from sakura.edge_client.pipeline import MAX_IN_FLIGHT
from sakura.edge_client.planning import level_utility, normalised_weights
from sakura.evaluation.cachegen import select_config
from sakura.evaluation.geometry import EditGeometry
from sakura.platform.traces import BandwidthTrace

ONDEVICE_SYSTEMS = ("on-device", "on-device-uncached", "on-device-prepared")
SYSTEMS = ("sakura", "sakura-no-pipeline", "sakura-fixed-medium", "full-sequential", "cachegen", "cachegen-matched",
           *ONDEVICE_SYSTEMS, "oracle")


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
    recomputed: bool = False  # CacheGen's text fallback: computed on the phone, not fetched
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
                 cold: bool = False, warm_template: bool = False, cachegen_floor: str | None = None,
                 cachegen_slo_s: float | None = None) -> None:
        """``cold``: a fresh session (no bandwidth samples, no compute calibration) instead of a
        phone that has used the link for the last seconds and has edited before. ``warm_template``:
        the template's manifest and context objects are on the phone (see the module docstring).
        ``cachegen_slo_s``: CacheGen's SLO for the KV (default: the compute-only edit time)."""
        self.g, self.trace, self.start, self.rtt, self.cold = geometry, trace, start, rtt_s, cold
        self.warm_template = warm_template
        self.cachegen_slo_s = geometry.compute_s if cachegen_slo_s is None else cachegen_slo_s
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

    def fetched(self, at: float, nbytes: int) -> float:
        """When one request sent at ``at`` for ``nbytes`` is complete (nothing else on the link)."""
        return at + self.rtt + self.transfer(at + self.rtt, nbytes) if nbytes else at

    def preamble_done(self, context_bytes: int | None = None) -> float:
        """When the KV can be requested: cold, after the manifest and then the context objects; warm, at once."""
        if self.warm_template:
            return 0.0
        return self.fetched(self.fetched(0.0, self.g.manifest_bytes),
                            self.g.context_bytes if context_bytes is None else context_bytes)

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
        if system in ONDEVICE_SYSTEMS:
            return self.ondevice(system)
        raise ValueError(f"unknown system {system!r}")

    def ondevice(self, system: str) -> SimEdit:
        """Download what the baseline needs (cold), then compute everything on the phone."""
        nbytes = self.g.prepared_bytes if system == "on-device-prepared" else self.g.source_bytes
        t = 0.0 if self.warm_template else self.fetched(0.0, nbytes)
        return SimEdit(system, t + self.g.ondevice_compute_s(system), [], t)

    def bound(self) -> float:
        """No edit can beat computing alone, nor fetching the smallest level of every shard."""
        t = self.preamble_done()
        smallest = sum(self.g.sizes[self.g.levels[0]])
        return t + max(self.g.compute_s, self.transfer(t, smallest))

    def pipelined(self, policy: LevelPolicy, system: str, *, abandon: bool = True) -> SimEdit:
        est, t = self.primed_estimator(), self.preamble_done()
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
        est, t = self.primed_estimator(), self.preamble_done()
        shards: list[SimShard] = []
        request = link_free = t
        for i in range(self.n):
            ctx = self._context(i, request, est, [], t, request, link_free)
            shard = self._fetch(i, policy.choose(ctx), request, link_free, est, None, [], t)
            shards.append(shard)
            link_free, request = shard.arrived, self._next_request(shards)
        return self._decode_then_compute(system, shards, link_free)

    def cachegen(self, ladder: list[str] | None = None, system: str = "cachegen") -> SimEdit:
        """CacheGen adapted to DiT, by its own rule (:func:`~sakura.evaluation.cachegen.select_config`):
        per chunk (shard) the finest configuration whose transfer at the last measured throughput
        fits ``SLO / chunks``, else its text fallback: the phone computes that chunk, which needs
        the reference pass through every block below it in the same step. Decode streams with the
        fetch; the fallbacks are computed once everything is decoded, then the model runs (no
        compute overlap)."""
        ladder = ladder or self.g.cachegen_levels
        est = self.primed_estimator()
        t = self.preamble_done(self.g.prepared_bytes)
        throughput = est.estimate().bytes_per_s  # type: ignore[union-attr]
        budget = self.cachegen_slo_s / self.n
        shards: list[SimShard] = []
        request = link_free = decode_free = t
        for i in range(self.n):
            level = select_config({lv: self.g.sizes[lv][i] for lv in ladder}, throughput, budget, ladder)
            if level is None:
                shards.append(SimShard(i, self.g.levels[-1], request, request, request, request, request,
                                       recomputed=True))
                continue
            shard = self._fetch(i, level, request, link_free, None, None, [], t)
            shard.expected_rate = throughput
            throughput = shard.bytes / max(shard.arrived - shard.first_byte, 1e-6)
            shard.decode_start = max(shard.arrived, decode_free)
            shard.decoded = decode_free = shard.decode_start + self.g.decode_s[level][i]
            shards.append(shard)
            link_free, request = shard.arrived, self._next_request([s for s in shards if not s.recomputed])
        return self._compute_after(shards, system, decode_free + self._fallback_compute(shards))

    def _fallback_compute(self, shards: list[SimShard]) -> float:
        """Computing the recomputed shards: per pass of the reference tokens (a step, or the only one
        of a KV-cached model), every block up to the highest recomputed one."""
        per, total = self.g.shards_per_step, 0.0
        for first in range(0, self.n, per):
            recomputed = [s.index for s in shards[first:first + per] if s.recomputed]
            if recomputed:
                total += sum(self.g.shard_compute_s[first:max(recomputed) + 1])
        return total

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
