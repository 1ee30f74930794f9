"""A trace-driven discrete-event model of one edit, for every system of the comparison.

It replays what the live client does: fetch shards one after another over a link whose
capacity is a real bandwidth trace (each request sent one round trip before the previous
response ends, so only the first pays the round trip), decode each, and let the
model consume it when the layer that needs it starts. Policies are the edge client's own code
(:mod:`sakura.edge_client.policy`, :mod:`sakura.evaluation.oracle`), fed the same
:class:`~sakura.edge_client.planning.PlanContext` and the same :class:`BandwidthEstimator` the
live pipeline builds. Compute and decode times come from an :class:`EditGeometry` measured on a
real model.

Systems: ``sakura`` (the hybrid: each block computed on the phone or fetched, the fetched ones by
robust MPC, overlapped pipeline, abandonment), ``sakura-own-encoder`` (the hybrid on a phone that
holds the model's text encoder, the ``on-device`` baseline's phone: it encodes the template's
prompt itself unless fetching the embeddings is known to be sooner,
:func:`~sakura.edge_client.planning.encode_on_phone`), ``sakura-fetch-only`` (the same without computing),
``sakura-no-pipeline``,
``sakura-fixed-medium``, ``full-sequential``, ``cachegen`` (its whole ladder and its own rule, text
fallback included), ``cachegen-matched`` (only CacheGen configurations whose output is at least as
faithful as SAKURA's smallest level: the comparison at preserved quality), the on-device baselines
(``on-device``: the stock pipeline; ``on-device-uncached``: the reference tokens through every block
at every step; ``on-device-prepared``: prompt embeddings and reference latents downloaded, the
reference KV computed once), ``oracle`` and the ``bound``. The pipelined systems follow the live
fetch stage's loop and its bounded stage queues (:data:`~sakura.edge_client.planning.MAX_AHEAD`
deep): the fetcher hands a download to the decoder only when it wakes to send a request (or drains
at the end), and not while the decoder's queue is full; the decoder hands a shard to the model only
while fewer than ``MAX_AHEAD`` wait there; so on a long edit the requests cannot run ahead of the
model. Each edit is a :class:`~sakura.edge_client.timeline.Timeline`, the record the live
pipeline keeps.

Every system starts from the same state of the phone. *Cold* (the default): nothing of the
template is there; each fetches what it needs over the same link, one request a round trip
(SAKURA and CacheGen: one preamble response with the manifest and the context objects, then the
KV; the hybrid's preamble also carries the template's image, which the phone makes the source from
(``reference_encode_s``) when it first computes a block, and CacheGen's its reference latents
its text fallback computes from; the on-device systems: the template's image and prompt, or the
prepared objects). *Warm*: the manifest and context objects (and the source the hybrid made from
the image) are on the phone from an earlier edit, the KV is not.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from sakura.edge_client import LevelPolicy, PlanContext
from sakura.edge_client.estimator import BandwidthEstimator
from sakura.edge_client.planning import (
    ABANDON_CHECK_S,
    ABANDON_MIN_S,
    COMPUTE,
    MAX_IN_FLIGHT,
    ShardOption,
    encode_on_phone,
    level_utility,
    normalised_weights,
    plan_context,
    stage_window,
)
from sakura.edge_client.policy import FixedPolicy, HybridPolicy, RobustMPCPolicy, asks_first_shard
from sakura.edge_client.timeline import ShardTiming, Stall, Timeline
from sakura.evaluation.geometry import EditGeometry
from sakura.evaluation.oracle import oracle_policy
from sakura.evaluation.sequential import cachegen, ondevice, sequential
from sakura.evaluation.stages import PipelineStages, arrived, consumed, first_byte
from sakura.platform.traces import BandwidthTrace

ONDEVICE_SYSTEMS = ("on-device", "on-device-uncached", "on-device-prepared")
#: SAKURA's variants that only fetch their KV: where even its smallest level cannot arrive in
#: reasonable time (:func:`~sakura.evaluation.regime.hopeless`) benches may count their lower bound
#: instead of simulating them. The hybrids always run.
FETCH_ONLY = ("sakura-fetch-only", "sakura-no-pipeline", "sakura-fixed-medium")
SYSTEMS = ("sakura", "sakura-own-encoder", "sakura-fetch-only", "sakura-no-pipeline", "sakura-fixed-medium",
           "full-sequential", "cachegen", "cachegen-matched", *ONDEVICE_SYSTEMS, "oracle")


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
        self._window = stage_window(self.n, one_pass=geometry.kv_cached)  # the live pipeline's queue depth
        self._utility = level_utility({lv: sum(geometry.sizes[lv]) for lv in geometry.levels})
        self._weights = normalised_weights(geometry.weights)
        self._mean_decode = {lv: sum(geometry.decode_s[lv]) / self.n for lv in geometry.levels}
        self._options = tuple(ShardOption({lv: geometry.sizes[lv][j] for lv in geometry.levels}, self._weights[j])
                              for j in range(self.n))
        #: Per shard of the edit being simulated: when the live fetcher's near-done timer fires
        #: (its request plus its bytes at the rate expected then; None without an estimate).
        self._timers: dict[int, float | None] = {}
        self._rates: dict[int, float | None] = {}  # the rate each request expected
        self._frontier = 0  # blocks of the template pass the phone has computed through
        #: The source still to be made from the template's image before the first computed block:
        #: (its seconds, the seconds the phone predicts for it), both 0 once made or when none.
        self._prepare = (0.0, 0.0)

    # -- the link ------------------------------------------------------------------------
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
    def run(self, system: str) -> Timeline:
        self._timers.clear()
        self._rates.clear()
        self._frontier = 0
        self._prepare = (0.0, 0.0)
        if system == "sakura":
            return self.pipelined(HybridPolicy(), system)
        if system == "sakura-own-encoder":
            return self.pipelined(HybridPolicy(), system, own_encoder=True)
        if system == "sakura-fetch-only":
            return self.pipelined(RobustMPCPolicy(), system)
        if system == "sakura-fixed-medium":
            return self.pipelined(FixedPolicy(self.g.levels[len(self.g.levels) // 2]), system)
        if system == "oracle":  # the hybrid with the true bandwidth: it splits and picks levels knowing the future
            horizon = None if self.g.kv_cached else 2 * self.g.shards_per_step
            oracle = oracle_policy(trace=self.trace, trace_time=lambda t: self.start + t, horizon=horizon)
            return self.pipelined(oracle, system, abandon=False)
        if system == "sakura-no-pipeline":
            return sequential(self, RobustMPCPolicy(), system)
        if system == "full-sequential":
            return sequential(self, FixedPolicy(self.g.levels[-1]), system)
        if system == "cachegen":
            return cachegen(self, self.g.cachegen_levels, system)
        if system == "cachegen-matched":
            ladder = self.g.cachegen_levels
            return cachegen(self, ladder[ladder.index(self.cachegen_floor):], system)
        if system in ONDEVICE_SYSTEMS:
            return ondevice(self, system)
        raise ValueError(f"unknown system {system!r}")

    def bound(self) -> float:
        """No edit can beat computing alone, nor fetching the smallest level of every shard."""
        t = self.preamble_done(hashed=False)
        smallest = sum(self.g.sizes[self.g.levels[0]])
        return t + max(self.g.compute_s, self.transfer(t, smallest))

    def pipelined(self, policy: LevelPolicy, system: str, *, abandon: bool = True,
                  own_encoder: bool = False) -> Timeline:
        """The live fetch stage's loop (:meth:`EditPipeline._fetch_stage`), ``t`` its clock: before
        requesting shard ``i`` it hands the oldest download over if ``MAX_IN_FLIGHT`` are out, waits
        until the last request is near done, and hands over every download complete by then; a
        hand-over waits while the decoder's queue is full (:class:`~sakura.evaluation.stages.PipelineStages`).
        Shards left to the phone are computed once the model reaches them; until then, in one pass
        of the reference tokens, the fetch stage may take them back (:meth:`_take_back`).
        ``own_encoder``: the preamble leaves the prompt embeddings out and the phone encodes the
        prompt before the pipeline starts, or fetches them then (:meth:`_prompt_embeddings`); warm,
        it kept them from the last edit, whichever way it got them."""
        hybrid = getattr(policy, "computes", False) and bool(self.g.shard_compute_s)
        est = self.primed_estimator()
        own_encoder = own_encoder and self.g.context_bytes > 0
        objects = (0 if own_encoder else self.g.context_bytes) + (self.hybrid_source_bytes if hybrid else 0)
        if hybrid and self.g.image_bytes and not self.warm_template:  # warm, the phone kept the source it made
            # the live session predicts the time once it has measured it (a phone that computed before)
            self._prepare = (self.g.reference_encode_s, 0.0 if self.cold else self.g.reference_encode_s)
        hashed = not getattr(policy, "computes", False)  # a phone that may compute asks for ``?hashes=0``
        t = self.preamble_done(objects, hashed=hashed)
        if objects and not self.warm_template:  # the live client learns the link from a preamble with objects
            est.observe(self.preamble_bytes(objects, hashed=hashed), max(t - self.rtt, 1e-6))
        edit = Timeline(system, [], compute_start=t, preamble_s=t,
                        preamble_bytes=self.preamble_bytes(objects, hashed=hashed))
        if own_encoder:
            self._prompt_embeddings(edit, est)
            t = edit.compute_start
        stages = PipelineStages(self, edit, extend=self._extend if hybrid else None,
                                window=self._window)
        run = _Run(policy, stages, est, t, abandon, hashes_due=not (hashed or self.warm_template))
        if asks_first_shard(policy, est.estimate()) and not self.warm_template:
            # asked for with the preamble, at the smallest level: its bytes follow the preamble's
            shard = self._fetch(0, self.g.levels[0], 0.0, edit.preamble_s, None, None, [], t)
            est.observe(shard.bytes, max(arrived(shard) - first_byte(shard), 1e-6))
            run.waiting.append(shard)
            run.link_free = arrived(shard)
        for i in range(len(run.waiting), self.n):
            if hybrid and self._may_compute(i, run):
                if self.cold and i > 0 and not self._template_s(stages.edit.shards):
                    run.t = max(run.t, self._reach(run, 1))  # the live stage plans on once a block was timed
                if policy.choose(self._run_context(i, run, can_compute=True)) == COMPUTE:
                    self._leave_to_phone(ShardTiming(i, level=COMPUTE, source="computed", chosen_at=run.t), run)
                    continue
            self._make_room(run)
            self._request(i, run, policy.choose(self._run_context(i, run)))
        if hybrid and self.g.kv_cached:
            self._take_back(run)
        self._reach(run, len(run.left))
        while run.waiting:
            run.t = stages.hand_over(run.waiting.popleft(), run.t)
        return stages.edit

    def _leave_to_phone(self, shard: ShardTiming, run: _Run) -> None:
        """In one pass of the reference tokens the shard waits for the model to reach it (it may be
        taken back meanwhile); per-step models hand it, and the downloads before it, over at once."""
        if self.g.kv_cached:
            run.left.append(shard)
            return
        while run.waiting:
            run.stages.hand_over(run.waiting.popleft(), run.t)
        run.stages.hand_over(shard, run.t)

    def _make_room(self, run: _Run) -> None:
        """Wait until the next request may leave (:meth:`EditPipeline._make_room`)."""
        if len(run.waiting) >= MAX_IN_FLIGHT:
            run.t = run.stages.hand_over(run.waiting.popleft(), run.t)
        if run.waiting:
            run.t = max(run.t, self._near_done(run.waiting[-1]))
        while run.waiting and arrived(run.waiting[0]) <= run.t:
            run.t = run.stages.hand_over(run.waiting.popleft(), run.t)
        self._reach(run, 0)

    def _request(self, i: int, run: _Run, level: str) -> None:
        if run.hashes_due:  # the live fetcher's first shard waits for the shard hashes object
            run.hashes_due = False
            nbytes = self.g.shard_hashes_bytes
            begin = max(run.t + self.rtt, run.link_free)
            run.t = run.link_free = begin + self.transfer(begin, nbytes)
            run.est.observe(nbytes, max(run.t - begin, 1e-6))
            run.stages.edit.preamble_bytes += nbytes
        done = run.stages.edit.shards
        shard = self._fetch(i, level, run.t, run.link_free, run.est, run.policy if run.abandon else None, done,
                            run.stages.edit.compute_start)
        run.waiting.append(shard)
        run.link_free = arrived(shard)

    def _take_back(self, run: _Run) -> None:
        """The live fetch stage's re-planning the other way (:meth:`EditPipeline._take_back`): the
        top of the prefix left to the phone is fetched after all, one block at a time, while the
        policy says so and the model has not reached it."""
        take_back = getattr(run.policy, "take_back", None)
        while take_back is not None:
            self._make_room(run)
            if not run.left:
                return
            level = take_back(self._run_context(run.left[0].index, run, can_compute=True), run.left[-1].index)
            if level is None:
                return
            self._request(run.left.pop().index, run, level)
            run.waiting[-1].taken_back = True

    def _reach(self, run: _Run, count: int) -> float:
        """The model computes the shards left to the phone that it has reached by ``run.t``, and the
        first ``count`` of them whenever it reaches them; returns when the last of those is computed
        (``run.t`` if none)."""
        stages, at = run.stages, run.t
        while run.left and run.left[0].index == len(stages.edit.shards) and (
                count > 0 or stages.next_needed <= run.t):
            stages.hand_over(run.left.pop(0), run.t)
            at, count = max(at, consumed(stages.edit.shards[-1])), count - 1
        return at

    def _prompt_embeddings(self, edit: Timeline, est: BandwidthEstimator) -> None:
        """The live session's choice once the preamble is in: encode the prompt on the phone (the
        compute stage starts that much later, and so does the fetch stage, which the live client
        starts after it) or fetch the embeddings in one more request. A fresh session has measured
        neither its encoder nor, before a preamble with objects, its link. Warm, the embeddings
        are kept from the last edit, fetched or encoded (which chose as this one does)."""
        t, nbytes = edit.compute_start, self.g.context_bytes
        if self.warm_template:
            return
        if encode_on_phone(nbytes, None if self.cold else self.g.text_encode_s, est.estimate(), est.rtt_s):
            edit.precompute_s = self.g.text_encode_s
            edit.compute_start = t + self.g.text_encode_s
            return
        done = self.fetched(t, nbytes)
        est.observe(nbytes, max(done - t - self.rtt, 1e-6))
        edit.compute_start = edit.preamble_s = done
        edit.preamble_bytes += nbytes

    @property
    def hybrid_source_bytes(self) -> int:
        """What the hybrid fetches with the context objects to compute from: the template's image
        (the live session makes the source from it on the compute stage), else the source objects
        (the reference latents)."""
        return self.g.image_bytes or max(0, self.g.prepared_bytes - self.g.context_bytes)

    def _may_compute(self, i: int, run: _Run) -> bool:
        """Shard ``i`` can still be computed: it starts a pass, or the shard before it is computed
        or left to the phone."""
        if i % self.g.shards_per_step == 0:
            return True
        done = run.stages.edit.shards
        last = run.left[-1] if run.left else (done[-1] if done else None)
        return last is not None and not run.waiting and last.index == i - 1 and last.computed

    def _template_s(self, done: list[ShardTiming]) -> tuple[float, ...]:
        """What the phone knows of its template compute: all of it, or (cold) nothing until it computed a block."""
        if self.cold and not any(s.computed for s in done):
            return ()
        known = list(self.g.shard_compute_s)
        if known and self._prepare[1]:  # the live TemplateComputer.block_costs: the source still to make
            known[self._frontier] += self._prepare[1]
        return tuple(known)

    def _extend(self, edit: Timeline, shard: ShardTiming, needed: float) -> bool:
        """The live compute stage's rule: at the frontier (every earlier shard of the pass computed),
        compute a fetched shard whose download is predicted (at the rate expected when it was
        requested) to end later than computing it would; the download is abandoned then."""
        i = shard.index
        frontier = max(self._frontier, i - i % self.g.shards_per_step)
        if shard.arrived_at is None:
            return False
        size, rate = self.g.sizes[shard.level][i], self._rates.get(i)
        if rate is None or shard.decoded_at is None or shard.decoded_at <= needed:
            return False
        first = first_byte(shard)
        received = int(min(size, self.delivered(first, needed))) if needed > first else 0
        due = max(needed, first) + (size - received) / rate + self._mean_decode[shard.level]
        known = self._template_s(edit.shards)
        if (not known and frontier != i) or due <= needed + sum(known[frontier:i + 1]):
            return False
        shard.abandoned.append(shard.level)
        shard.bytes = shard.bytes - size + received
        shard.level, shard.source = COMPUTE, "computed"
        return True

    # -- mechanics -----------------------------------------------------------------------
    def _near_done(self, shard: ShardTiming) -> float:
        """When the live fetcher deems ``shard``'s response near done: a round trip before it ends,
        as predicted at request time from the bandwidth estimate (its timer) or measured from its own
        progress, whichever comes first; requested without an estimate, at its first byte."""
        timer = self._timers.get(shard.index)
        if timer is None:
            return first_byte(shard)
        return min(arrived(shard), timer, max(first_byte(shard), arrived(shard) - self.rtt))

    def _consume(self, edit: Timeline, shard: ShardTiming, available: float) -> None:
        """The model asks for ``shard`` after its compute since the previous one (or the start) and
        takes it once ``available``; the wait between is a stall. A shard the phone computes is
        taken once computed, as the live pipeline records it: from the frontier of its pass
        through its block, the blocks below it computed on the way."""
        i = shard.index
        shard.needed_at = self._needed(edit, i)
        if shard.level != COMPUTE:  # fetched (or computed before the model ran: CacheGen's fallback)
            shard.consumed_at = max(available, shard.needed_at)
        else:
            frontier = max(self._frontier, i - i % self.g.shards_per_step)
            shard.consumed_at = shard.decoded_at = (shard.needed_at + self._prepare[0]
                                                    + sum(self.g.shard_compute_s[frontier:i + 1]))
            self._frontier, self._prepare = i + 1, (0.0, 0.0)
        if shard.level != COMPUTE and shard.consumed_at > shard.needed_at:
            edit.stalls.append(Stall(i, shard.needed_at, shard.consumed_at))
        edit.shards.append(shard)
        edit.compute_end = shard.consumed_at + self.g.gaps_s[i]

    def _needed(self, edit: Timeline, index: int) -> float:
        """When the model asks for shard ``index``: after its compute since the previous one (or the start)."""
        before = edit.shards[-1] if edit.shards else None
        if before is None:
            return edit.compute_start + self.g.startup_s
        return consumed(before) + self.g.gaps_s[index - 1]

    def _fetch(self, i: int, level: str, t: float, link_free: float, est: BandwidthEstimator | None,
               policy: LevelPolicy | None, consumed: list[ShardTiming], compute_start: float,
               rate: float | None = None) -> ShardTiming:
        """Request shard ``i`` at ``t``; its bytes flow once the link is free and a round trip passed.
        ``rate``: the throughput the request expects when there is no estimator."""
        shard = ShardTiming(i, level=level, chosen_at=t, requested_at=t)
        estimate = est.estimate() if est is not None else None
        timer_rate = rate
        if estimate is not None:
            rate, timer_rate = estimate.bytes_per_s, estimate.point_bytes_per_s
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
        shard.level, shard.arrived_at, shard.first_byte_at = level, arrival, begin
        shard.bytes += size
        shard.attempts = 1
        if timer_rate is not None:  # the live fetcher's timer: behind what is still to come of those in flight
            ahead = self.delivered(t, link_free) if link_free > t else 0.0
            self._timers[i] = t + max(self.rtt, ahead / timer_rate) + size / timer_rate - self.rtt
        else:
            self._timers[i] = None
        self._rates[i] = rate
        if est is not None:
            est.observe_rtt(begin - t)
            est.observe(size, max(arrival - begin, 1e-6))
        return shard

    def _abandon_point(self, i: int, level: str, begin: float, arrival: float, est: BandwidthEstimator | None,
                       policy: LevelPolicy | None, consumed: list[ShardTiming],
                       compute_start: float) -> tuple[float, int, str] | None:
        if policy is None or est is None or arrival - begin <= ABANDON_MIN_S:
            return None
        size, at = self.g.sizes[level][i], begin + ABANDON_MIN_S
        while at < arrival:
            received = int(min(size, self.delivered(begin, at)))
            done = [s for s in consumed if s.consumed_at is not None and s.consumed_at <= at]
            ctx = self._context(i, at, est, done, compute_start, at, arrival)
            smaller = policy.abandon(ctx, level, received, received / (at - begin))
            if smaller is not None and smaller != level:
                return at, received, smaller
            at += ABANDON_CHECK_S
        return None

    def _run_context(self, i: int, run: _Run, can_compute: bool = False) -> PlanContext:
        edit = run.stages.edit
        return self._context(i, run.t, run.est, edit.shards, edit.compute_start, run.stages.decode_free,
                             run.link_free, can_compute, run.left, self.g.shard_hashes_bytes if run.hashes_due else 0)

    def _context(self, i: int, now: float, est: BandwidthEstimator, done: list[ShardTiming], compute_start: float,
                 decode_free: float, link_free: float, can_compute: bool = False,
                 left: Sequence[ShardTiming] = (), hashes_bytes: int = 0) -> PlanContext:
        """What the live pipeline's policy would know at ``now`` (``done``: the shards consumed so
        far; ``left``: those left to the phone it has not reached yet; ``hashes_bytes``: the shard
        hashes object, while the first fetched shard still waits for it)."""
        g = self.g
        startup, gaps = g.startup_s, list(g.gaps_s)
        if self.cold:  # a fresh session learns compute times as the model asks for shards
            asked = {s.index for s in done if s.needed_at is not None and s.needed_at <= now}
            startup = startup if 0 in asked else 0.0
            gaps = [gap if j + 1 in asked else 0.0 for j, gap in enumerate(gaps)]
        known = [s for s in done if s.consumed_at is not None and s.consumed_at <= now]
        last = (known[-1].index, consumed(known[-1])) if known else None
        return plan_context(now, i, levels=g.levels, shards=self._options, utility=self._utility,
                            estimate=est.estimate(), rtt_s=est.rtt_s, compute=gaps, startup=startup,
                            decode_s=self._mean_decode, compute_start=compute_start, last_consumed=last,
                            decode_free_at=decode_free, link_free_at=link_free,
                            template_compute=self._template_s(done) if can_compute else (),
                            computed=[s.index for s in (*done, *left) if s.computed],
                            pass_shards=self.g.shards_per_step, can_compute=can_compute, hashes_bytes=hashes_bytes,
                            window=self._window)


@dataclass
class _Run:
    """A pipelined edit being simulated: the fetch stage's clock and what it holds."""

    policy: LevelPolicy
    stages: PipelineStages
    est: BandwidthEstimator
    t: float
    abandon: bool
    link_free: float = 0.0
    hashes_due: bool = False  # the preamble's manifest came without its shards' sha256s: fetch them first
    waiting: deque[ShardTiming] = field(default_factory=deque)  # requested, not yet handed to the decoder
    left: list[ShardTiming] = field(default_factory=list)  # left to the phone, not reached by the model yet

    def __post_init__(self) -> None:
        self.link_free = self.t
