"""A trace-driven discrete-event model of one edit, for every system of the comparison.

It replays what the live client does: fetch shards one after another over a link whose
capacity is a real bandwidth trace (each request sent one round trip before the previous
response ends, so only the first pays the round trip), decode each, and let the
model consume it when the layer that needs it starts. Policies are the edge client's own code
(:mod:`sakura.edge_client.policy`, :mod:`sakura.evaluation.oracle`), fed the same
:class:`~sakura.edge_client.planning.PlanContext` and the same
:class:`~sakura.edge_client.estimator.BandwidthEstimator` the live pipeline builds, told of each
download when it ends (:class:`~sakura.evaluation.sim_estimator.TimedEstimator`). Compute and
decode times come from an :class:`EditGeometry` measured on a real model.

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

from functools import partial

from sakura.edge_client import LevelPolicy, PlanContext
from sakura.edge_client.fetch_loop import FetchLoop
from sakura.edge_client.late_download import Waiting, climbs, computes_instead, judge_download, next_check
from sakura.edge_client.planning import (
    COMPUTE,
    MAX_IN_FLIGHT,
    encode_on_phone,
    fewest_bytes,
)
from sakura.edge_client.policy import (
    COLD_START_BYTES_PER_S,
    FixedPolicy,
    HybridPolicy,
    RobustMPCPolicy,
    asks_first_shard,
    can_take_back,
)
from sakura.edge_client.timeline import ShardTiming, Timeline
from sakura.emulation.traces import BandwidthTrace
from sakura.evaluation.geometry import EditGeometry
from sakura.evaluation.oracle import oracle_policy
from sakura.evaluation.sequential import cachegen, ondevice, sequential
from sakura.evaluation.sim_estimator import TimedEstimator
from sakura.evaluation.sim_link import SimulatedLink, arrived, first_byte
from sakura.evaluation.sim_model import SimulatedModel, consumed
from sakura.evaluation.stages import PipelineStages

ONDEVICE_SYSTEMS = ("on-device", "on-device-uncached", "on-device-prepared")
#: SAKURA's variants that only fetch their KV: where even its smallest level cannot arrive in
#: reasonable time (:func:`~sakura.evaluation.runs.hopeless`) benches may count their lower bound
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
        self.link = SimulatedLink(geometry, trace, start, rtt_s=rtt_s, cold=cold, warm_template=warm_template)
        self.model = SimulatedModel(geometry, cold=cold)

    # -- the link ------------------------------------------------------------------------
    def transfer(self, at: float, nbytes: int) -> float:
        return self.link.transfer(at, nbytes)

    def delivered(self, t0: float, t1: float) -> float:
        return self.link.delivered(t0, t1)

    def fetched(self, at: float, nbytes: int) -> float:
        """When one request sent at ``at`` for ``nbytes`` is complete (nothing else on the link)."""
        return self.link.fetched(at, nbytes)

    def preamble_done(self, context_bytes: int | None = None, *, hashed: bool = True) -> float:
        return self.link.preamble_done(context_bytes, hashed=hashed)

    def preamble_bytes(self, context_bytes: int | None = None, *, hashed: bool = True) -> int:
        return self.link.preamble_bytes(context_bytes, hashed=hashed)

    def primed_estimator(self) -> TimedEstimator:
        return self.link.primed_estimator()

    # -- systems -------------------------------------------------------------------------
    def run(self, system: str) -> Timeline:
        self.link.reset()
        self.model.reset()
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
            return sequential(self.link, self.model, RobustMPCPolicy(), system)
        if system == "full-sequential":
            return sequential(self.link, self.model, FixedPolicy(self.g.levels[-1]), system)
        if system == "cachegen":
            return cachegen(self.link, self.model, self.g.cachegen_levels, system, self.cachegen_slo_s)
        if system == "cachegen-matched":
            ladder = self.g.cachegen_levels
            return cachegen(self.link, self.model, ladder[ladder.index(self.cachegen_floor):], system,
                            self.cachegen_slo_s)
        if system in ONDEVICE_SYSTEMS:
            return ondevice(self.link, system)
        raise ValueError(f"unknown system {system!r}")

    def bound(self) -> float:
        """No edit can beat computing alone, nor fetching the smallest level of every shard."""
        t = self.preamble_done(hashed=False)
        smallest = sum(self.g.sizes[self.g.levels[0]])
        return t + max(self.g.compute_s, self.transfer(t, smallest))

    def pipelined(self, policy: LevelPolicy, system: str, *, abandon: bool = True,
                  own_encoder: bool = False) -> Timeline:
        """The live fetch stage's own loop (:class:`~sakura.edge_client.fetch_loop.FetchLoop`),
        driven by events (:class:`_Run`, ``t`` its clock); a hand-over waits while the decoder's
        queue is full (:class:`~sakura.evaluation.stages.PipelineStages`). Shards left to the phone
        are computed once the model reaches them; until then, in one pass of the reference tokens,
        the fetch stage may take them back.
        ``own_encoder``: the preamble leaves the prompt embeddings out and the phone encodes the
        prompt before the pipeline starts, or fetches them then (:meth:`_prompt_embeddings`); warm,
        it kept them from the last edit, whichever way it got them."""
        hybrid = getattr(policy, "computes", False) and bool(self.g.shard_compute_s)
        est = self.primed_estimator()
        own_encoder = own_encoder and self.g.context_bytes > 0
        objects = (0 if own_encoder else self.g.context_bytes) + (self.hybrid_source_bytes if hybrid else 0)
        if hybrid and self.g.image_bytes and not self.warm_template:  # warm, the phone kept the source it made
            # the live session predicts the time once it has measured it (a phone that computed before)
            self.model.prepare = (self.g.reference_encode_s, 0.0 if self.cold else self.g.reference_encode_s)
        hashed = not getattr(policy, "computes", False)  # a phone that may compute asks for ``?hashes=0``
        t = self.preamble_done(objects, hashed=hashed)
        if objects and not self.warm_template:  # the live client learns the link from a preamble with objects
            est.observe(self.preamble_bytes(objects, hashed=hashed), max(t - self.rtt, 1e-6), at=t)
        edit = Timeline(system, [], compute_start=t, preamble_s=t,
                        preamble_bytes=self.preamble_bytes(objects, hashed=hashed))
        if own_encoder:
            self._prompt_embeddings(edit, est)
            t = edit.compute_start
        stages = PipelineStages(self.model, edit, extend=partial(self._extend, est) if hybrid else None,
                                window=self.link.window)
        run = _Run(self, policy, stages, est, t, abandon, hashes_due=not (hashed or self.warm_template))
        asked: tuple[int, ...] = ()
        if asks_first_shard(policy, est.estimate(t)) and not self.warm_template:
            # asked for with the preamble, at the smallest level: its bytes follow the preamble's
            shard = self.link.fetch(0, self.g.levels[0], 0.0, edit.preamble_s, None, None, [], t)
            est.observe(shard.bytes, max(arrived(shard) - first_byte(shard), 1e-6), at=arrived(shard))
            run.waiting[0], asked = shard, (0,)
            run.with_preamble = asked
            run.link_free = arrived(shard)
        loop = FetchLoop(self.n, pass_shards=self.g.shards_per_step, one_pass=self.g.kv_cached,
                         max_in_flight=MAX_IN_FLIGHT, computes=hybrid, takes_back=can_take_back(policy), asked=asked)
        run.ahead = loop.ahead
        loop.run(run)
        return stages.edit

    def _request(self, i: int, run: _Run, level: str) -> None:
        if run.hashes_due:  # the live fetcher's first shard waits for the shard hashes object
            run.hashes_due = False
            nbytes = self.g.shard_hashes_bytes
            begin = max(run.t + self.rtt, run.link_free)
            run.t = run.link_free = begin + self.transfer(begin, nbytes)
            run.est.observe(nbytes, max(run.t - begin, 1e-6), at=run.t)
            run.stages.edit.preamble_bytes += nbytes
        done = run.stages.edit.shards
        shard = self.link.fetch(i, level, run.t, run.link_free, run.est, run.policy if run.abandon else None, done,
                                run.stages.edit.compute_start)
        run.waiting[i] = shard
        run.link_free = arrived(shard)

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

    def _prompt_embeddings(self, edit: Timeline, est: TimedEstimator) -> None:
        """The live session's choice once the preamble is in: encode the prompt on the phone (the
        compute stage starts that much later, and so does the fetch stage, which the live client
        starts after it) or fetch the embeddings in one more request. A fresh session has measured
        neither its encoder nor, before a preamble with objects, its link. Warm, the embeddings
        are kept from the last edit, fetched or encoded (which chose as this one does)."""
        t, nbytes = edit.compute_start, self.g.context_bytes
        if self.warm_template:
            return
        if encode_on_phone(nbytes, None if self.cold else self.g.text_encode_s, est.estimate(t), est.rtt_s(t)):
            edit.precompute_s = self.g.text_encode_s
            edit.compute_start = t + self.g.text_encode_s
            return
        done = self.fetched(t, nbytes)
        est.observe(nbytes, max(done - t - self.rtt, 1e-6), at=done)
        edit.compute_start = edit.preamble_s = done
        edit.preamble_bytes += nbytes

    @property
    def hybrid_source_bytes(self) -> int:
        """What the hybrid fetches with the context objects to compute from: the template's image
        (the live session makes the source from it on the compute stage), else the source objects
        (the reference latents)."""
        return self.g.image_bytes or max(0, self.g.prepared_bytes - self.g.context_bytes)

    def _extend(self, est: TimedEstimator, edit: Timeline, shard: ShardTiming,
                needed: float) -> tuple[float | None, float]:
        """The live compute stage's rule (:mod:`~sakura.edge_client.late_download`), re-judged every
        ``LATE_CHECK_S`` and when one of its waits runs out (:func:`~sakura.edge_client.late_download.next_check`)
        from when the model asks for ``shard`` until it is decoded: at the frontier
        (every earlier shard of the pass computed), compute it once its download would be decoded
        later than computing it would end; the download is abandoned then. Where the frontier of its
        pass is below the shard, the phone runs the pass a block on while that block is predicted to
        end before the download is decoded, and starts a pass not begun only where the rest of it
        is predicted to be fetched later than computed
        (:func:`~sakura.edge_client.late_download.climbs`). Returns
        when the phone starts computing it (or None), and when it is done with the blocks it ran
        on. Each judgement plans at the rate and round trip the phone's estimator holds then
        (``est``), as the live stage does. The abandoned download
        keeps its place on the link (the later requests were timed behind it), where the live
        fetcher stops it: conservative, and a later shard queued behind it, which delivers nothing
        while the model waits, is computed too."""
        i = shard.index
        if shard.arrived_at is None or shard.decoded_at is None:
            return None, needed
        known = self.model.template_s(edit.shards)
        frontier = max(self.model.frontier, self.model.pass_start(i))
        if not known and frontier != i:
            return None, needed
        size = self.g.sizes[shard.level][i]

        def received_by(at: float) -> int:
            return self.link.received(shard, at)

        start, per = self.model.pass_start(i), self.g.shards_per_step  # its pass
        later = fewest_bytes(self.link.shard_options, i + 1, start + per)
        at, waiting = needed, Waiting(needed, received_by(needed))
        busy = needed  # the phone runs template blocks until then
        while at < shard.decoded_at:
            received = received_by(at)
            estimate = est.estimate(at)
            rate = estimate.bytes_per_s if estimate is not None else COLD_START_BYTES_PER_S  # the live guess
            due = judge_download(at, requested_at=shard.requested_at, rtt_s=est.rtt_s(at), planned_rate=rate,
                                 received=received, left=size - received, later=later,
                                 decode_s=self.link.mean_decode[shard.level], waiting=waiting)
            if frontier < i and climbs(due, at, block_s=known[frontier], begun=frontier > start,
                                       waited=at - needed, pass_s=sum(known[frontier:start + per])):
                at = busy = self.model.climb(at, i)
                known, frontier = self.model.template_s(edit.shards), frontier + 1
                continue
            compute_s = sum(known[frontier:i + 1])
            if computes_instead(due, at, waited=at - needed, compute_s=compute_s):
                shard.abandoned.append(shard.level)
                shard.bytes = shard.bytes - size + received
                shard.level, shard.source = COMPUTE, "computed"
                return at, at
            at = next_check(at, asked=needed, compute_s=compute_s,
                            block_s=known[frontier] if frontier == start and frontier < i else None)
        return None, busy

    def _run_context(self, i: int, run: _Run, can_compute: bool = False) -> PlanContext:
        edit = run.stages.edit
        hashes = self.g.shard_hashes_bytes if run.hashes_due else 0
        return self.link.context(i, run.t, run.est, edit.shards, edit.compute_start, run.stages.decode_free,
                                 self.link.in_flight(run.t, exclude=run.with_preamble), can_compute, run.left, hashes,
                                 self.model.template_s(edit.shards, shared=True) if can_compute else (), run.ahead)


class _Run:
    """A pipelined edit being simulated: the fetch stage's clock and what it holds, and the
    mechanics the shared :class:`~sakura.edge_client.fetch_loop.FetchLoop` drives (its
    :class:`~sakura.edge_client.fetch_loop.FetchDriver`), as events on the simulator's link."""

    def __init__(self, sim: EditSimulator, policy: LevelPolicy, stages: PipelineStages, est: TimedEstimator,
                 t: float, abandon: bool, *, hashes_due: bool) -> None:
        self.sim, self.policy, self.stages, self.est, self.t, self.abandon = sim, policy, stages, est, t, abandon
        self.link_free = t
        self.hashes_due = hashes_due  # the preamble's manifest came without its shards' sha256s: fetch them first
        self.waiting: dict[int, ShardTiming] = {}  # requested, not yet handed to the decoder
        self.left: list[ShardTiming] = []  # left to the phone, not reached by the model yet
        self.ahead: list[int] = []  # the loop's :attr:`FetchLoop.ahead`
        #: Asked for with the preamble: the live fetcher does not count its bytes in flight.
        self.with_preamble: tuple[int, ...] = ()
        self._timed_at: float | None = None  # when the phone knows what a block costs

    # -- what the loop asks -------------------------------------------------------------
    def stopped(self) -> bool:
        return False

    def computed(self, index: int) -> bool:
        done = self.stages.edit.shards
        return index < len(done) and done[index].computed

    def choose(self, index: int, *, can_compute: bool) -> str:
        return self.policy.choose(self.sim._run_context(index, self, can_compute=can_compute))

    def take_back(self, first: int, top: int) -> str | None:
        return self.policy.take_back(self.sim._run_context(first, self, can_compute=True), top)  # type: ignore[attr-defined]

    def left_to_phone(self) -> list[int]:
        return [s.index for s in self.left]

    def arrived(self, index: int) -> bool:
        return arrived(self.waiting[index]) <= self.t

    # -- what the loop does -------------------------------------------------------------
    def await_template_cost(self) -> None:
        """The live stage plans on once a block was timed."""
        self.t = max(self.t, self._timed())

    def await_model(self, index: int) -> None:
        """The model's events run on to when it asks for shard ``index`` (every shard below it is
        with the stages, so the model has taken them)."""
        edit = self.stages.edit
        self._commit_below(index)
        if self.sim.g.kv_cached:  # in one pass the model computes those left to it on its way
            self.sim._reach(self, sum(1 for s in self.left if s.index < index))
        assert len(edit.shards) >= index, "the shards below it are handed over in order"
        needed = edit.shards[index].needed_at if index < len(edit.shards) else self.sim.model.needed(edit, index)
        self.t = max(self.t, needed or self.t)

    def template_timed(self, near: int | None) -> bool:
        timed = self._timed()
        if near is not None:
            near_at = min(self.sim.link.near_done(self.waiting[near]), arrived(self.waiting[near]))
            self.t = max(self.t, min(near_at, timed))
        return timed <= self.t

    def _timed(self) -> float:
        """When the phone knows what a block costs: from the start where it knew before; a fresh
        phone once the model computed its first block (the model's events run ahead to it)."""
        if self._timed_at is None:
            fresh = self.sim.cold and not self.sim.model.template_s(self.stages.edit.shards)
            self._timed_at = self.sim._reach(self, 1) if fresh else self.t
        return self._timed_at

    def leave_to_phone(self, index: int) -> None:
        self.left.append(ShardTiming(index, level=COMPUTE, source="computed", chosen_at=self.t))

    def claim(self, index: int) -> bool:
        """Unless the model has reached it by now (the live compute stage's ``needed_at``)."""
        self.sim._reach(self, 0)
        shard = next((s for s in self.left if s.index == index), None)
        if shard is not None:
            self.left.remove(shard)
        return shard is not None

    def request(self, index: int, level: str, *, taken_back: bool) -> None:
        self.sim._request(index, self, level)
        self.waiting[index].taken_back = taken_back

    def wait_near_done(self, index: int, head: int) -> bool:
        near, complete = self.sim.link.near_done(self.waiting[index]), arrived(self.waiting[head])
        self.t = max(self.t, min(near, complete))
        return near <= complete

    def hand_over(self, index: int) -> None:
        self._commit_below(index)
        self.t = self.stages.hand_over(self.waiting.pop(index), self.t)

    def release(self, index: int) -> None:
        self._commit_below(index)
        self.stages.hand_over(self.waiting.pop(index), self.t)

    def _commit_below(self, index: int) -> None:
        """A per-step model's shards left to the phone below ``index`` go to the model's queue
        before it (its stage queues hold two shards, and the stages take them in order): the
        phone computes them when the model reaches them. The live fetch stage could still take
        one back until then; the simulated one no longer does (conservative). In one pass the
        queues hold the pass, and a download handed over above the prefix waits there for it."""
        while not self.sim.g.kv_cached and self.left and self.left[0].index < index:
            self.stages.hand_over(self.left.pop(0), self.t)

    def catch_up(self) -> None:
        self.sim._reach(self, 0)

    def finish_left(self) -> None:
        self.sim._reach(self, len(self.left))
