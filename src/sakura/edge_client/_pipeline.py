"""The overlapped edit pipeline: fetch shard i+1, decode shard i, compute with shard i-1.

Fetch and decode run in their own threads; the fetch stage
(:mod:`~sakura.edge_client._fetch_stage`) sends the next shard's request about a round trip before
the current response ends (on another kept-alive connection, at most ``max_in_flight`` at once),
so the link does not idle for a round trip between shards; compute runs in the caller's thread,
inside the model's replay loop, which reads each shard from a :class:`StreamingKV` when the layer
that needs it starts (blocking there is a *stall*). Queues
are bounded: the fetcher is at most ``max_ahead`` encoded shards ahead of the decoder, and the
decoder at most ``max_ahead`` decoded shards ahead of the model, so memory stays bounded by the
window, not the template.
The first error of any stage stops every stage at once (downloads in flight are aborted by the
transport's watchdog, nobody waits for them) and is raised to the caller; so is a cancel. One
exception: where the phone can compute a shard, a download of it that the link or the server lets
down (or that does not decode) is computed instead, and no request leaves after it
(:meth:`EditPipeline.computes_instead`; ``docs/architecture.md``, the fetch stage). Each
stage tells the app's progress callback (:mod:`~sakura.edge_client._progress`) what it records
in the timeline, on its own thread; what the callback raises is that stage's error.

With a :class:`~sakura.edge_client._template_kv.TemplateComputer` the phone may compute shards
itself, always a prefix: the fetch stage skips a shard the policy says to compute (``COMPUTE``),
and the compute stage computes a skipped shard when the model needs it, or extends the prefix
when the next shard's fetch is predicted to end later than computing it would (that download is
then abandoned, freeing the link for the shards after it). The other way too: once every shard
above the prefix is on its way, the fetch stage takes back the top of the prefix, block by block,
while the policy says its download ends before the phone would have computed it (the link
proved faster than planned) and the compute stage has not reached it. Those decisions are the
:class:`~sakura.edge_client.fetch_loop.FetchLoop`'s, which the simulator drives too; the fetch
stage gives it a thread and a real link, this module the decoder and a real model.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from sakura.edge_client._compute_model import ComputeModel
from sakura.edge_client._fetch_stage import FetchStage
from sakura.edge_client._fetcher import ShardFetcher
from sakura.edge_client._progress import ProgressCallback, ProgressTeller
from sakura.edge_client._streaming_kv import POLL_S, StreamingKV
from sakura.edge_client._template_kv import TemplateComputer
from sakura.edge_client._validation import ShardLimits
from sakura.edge_client.device import Device
from sakura.edge_client.errors import ConfigError, EditCancelled
from sakura.edge_client.estimator import BandwidthEstimator
from sakura.edge_client.fetch_loop import FetchLoop
from sakura.edge_client.late_download import Due, Waiting, judge_download
from sakura.edge_client.planning import (
    COMPUTE,
    MAX_IN_FLIGHT,
    PlanContext,
    ShardOption,
    fewest_bytes,
    level_utility,
    normalised_weights,
    plan_context,
    stage_window,
)
from sakura.edge_client.policy import LevelPolicy, can_take_back, planned_rate
from sakura.edge_client.timeline import ShardTiming, Timeline
from sakura.platform.codec import decode_shard
from sakura.platform.errors import CodecError
from sakura.platform.kv import pass_shards
from sakura.platform.manifest import PhoneManifest

T = TypeVar("T")
#: How long ``run`` waits for its stage threads once it is done; they are daemons that stop on
#: their own (downloads are aborted, a decode finishes), so a cancel is never held up by them.
_JOIN_S = 0.2


class EditPipeline:
    def __init__(
        self,
        manifest: PhoneManifest,
        fetcher: ShardFetcher,
        policy: LevelPolicy,
        estimator: BandwidthEstimator,
        compute_model: ComputeModel,
        *,
        limits: ShardLimits,
        clock: Callable[[], float],
        cancel: threading.Event | None = None,
        device: Device | None = None,
        max_ahead: int | None = None,
        max_in_flight: int = MAX_IN_FLIGHT,
        template: TemplateComputer | None = None,
        factored: bool = False,
        on_progress: ProgressCallback | None = None,
    ) -> None:
        self.manifest, self.fetcher, self.policy, self.limits = manifest, fetcher, policy, limits
        self.estimator, self.compute_model, self.clock = estimator, compute_model, clock
        self.device = device or Device()
        self.template = template
        #: Hand version 2 shards to the model as factors (a model that attends to them so), else K and V.
        self.factored = factored
        #: Per shard the model waits for: since when, and its bytes received then (the extend rule).
        self._waits: dict[int, Waiting] = {}
        #: Shards whose download failed, which the phone computes instead; after the first, no
        #: request leaves (the link or the server let the edit down: the phone finishes alone).
        self.failed: set[int] = set()
        if max_in_flight < 1:
            raise ConfigError("max_in_flight must be >= 1")
        self.max_in_flight = max_in_flight
        self.model = manifest.model.name
        self.cancel = cancel or threading.Event()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        if max_ahead is None:
            max_ahead = stage_window(len(manifest.shards), one_pass=not manifest.model.step_dependent)
        self.max_ahead = max_ahead  # the policy plans with the queues' depth (planning.request_lag)
        self._encoded: queue.Queue[tuple[int, str, bytes]] = queue.Queue(maxsize=max_ahead)
        self.kv = StreamingKV(self, max_ahead)
        self.timeline = Timeline(policy.name, [ShardTiming(i, str(s.key)) for i, s in enumerate(manifest.shards)])
        #: Tells the app each shard's steps as the stages record them in the timeline.
        self.progress = ProgressTeller(on_progress, self.timeline, clock, self.stopped)
        levels = manifest.readable_levels()  # a level in a wire format this decoder lacks is never fetched
        if not levels:
            raise ConfigError(f"this app decodes none of the levels of {manifest.template_id} v{manifest.version} "
                              f"(formats {sorted({lvl.format for lvl in manifest.levels})}): update it")
        self._levels = tuple(levels)
        self._utility = level_utility({lvl.name: lvl.bytes for lvl in manifest.levels if lvl.name in levels})
        weights = normalised_weights([s.weight for s in manifest.shards])
        cached = [set(fetcher.cached_levels(i)) for i in range(len(manifest.shards))]
        # What each shard costs at each level (cached levels are free): fixed for the whole edit.
        self._options = tuple(
            ShardOption({lvl: 0 if lvl in cached[i] else s.levels[lvl].length for lvl in levels}, weights[i])
            for i, s in enumerate(manifest.shards))
        n = len(manifest.shards)
        self._mean_size = {lvl: sum(s.levels[lvl].length for s in manifest.shards) // n for lvl in self._levels}
        one_pass = not manifest.model.step_dependent
        self._loop = FetchLoop(
            n, pass_shards=pass_shards([s.key for s in manifest.shards]),
            one_pass=one_pass, max_in_flight=max_in_flight, computes=template is not None,
            takes_back=can_take_back(policy), asked=(0,) if fetcher.first_level is not None else ())
        self.fetch = FetchStage(self, self._loop, self._levels, self._stop)

    # -- running -------------------------------------------------------------------------
    def run(self, compute: Callable[[StreamingKV], T]) -> T:
        """Run ``compute`` (the model's replay loop over :attr:`kv`) with fetch and decode overlapped."""
        threads = [threading.Thread(target=self._guard, args=(stage,), name=f"sakura-{name}", daemon=True)
                   for name, stage in (("fetch_stage", self.fetch.run), ("decode_stage", self._decode_stage))]
        self.timeline.compute_start = self.clock()
        for t in threads:
            t.start()
        try:
            result = compute(self.kv)
            self.kv.finish()
            if self.cancel.is_set():
                raise EditCancelled("the edit was cancelled")
            return result
        except BaseException as exc:
            self.fail(exc)
            raise
        finally:
            self._stop.set()
            self.progress.close()
            deadline = time.monotonic() + _JOIN_S
            for t in threads:
                t.join(timeout=max(0.0, deadline - time.monotonic()))
            self.timeline.compute_end = self.clock()

    def _guard(self, stage: Callable[[], None]) -> None:
        try:
            stage()
        except BaseException as exc:  # surfaced to the caller through the compute stage
            self.fail(exc)

    @property
    def error(self) -> BaseException | None:
        return self._error

    def planned_compute(self, index: int) -> bool:
        return self._loop.decided[index] == COMPUTE or index in self.failed

    def supersede(self, index: int) -> None:
        self.fetch.supersede(index)

    def fail(self, exc: BaseException) -> None:
        with self.kv.cond:
            if self._error is None:
                self._error = exc
            self._stop.set()
            self.kv.cond.notify_all()

    def stopped(self) -> bool:
        return self._stop.is_set() or self.cancel.is_set()

    def to_decoder(self, item: tuple[int, str, bytes]) -> None:
        """Queue a download (or ``COMPUTE`` for a shard the phone computes) for the decode stage."""
        self._put(self._encoded, item)

    # -- shared by the stages: the fallback, and what the policy knows ---------------------
    def computes_instead(self, index: int, why: str) -> bool:
        """Leave shard ``index``, whose download failed (``why``), to the phone if it can still
        compute it: a hybrid edit never fails where the phone alone would not (``docs/architecture.md``)."""
        with self.kv.cond:
            if self.template is None or index < self.template.frontier or self.stopped() \
                    or self.fetcher.transport.closed:
                return False
            self.failed.add(index)
            self.timeline.shards[index].failed = why
            self.kv.cond.notify_all()  # a model waiting for it computes it now
        self.progress.tell("failed", index)
        return True

    def context(self, index: int, *, can_compute: bool = True) -> PlanContext:
        """What the policy knows now about shard ``index`` and those after it."""
        gaps = self.compute_model.gaps(self.model, len(self._options))
        known = self.compute_model.template_s(self.model, len(self._options))
        template_s = self.template.block_costs(known, shared=True) if self.template else ()
        return plan_context(
            self.clock(), index, levels=self._levels, shards=self._options, utility=self._utility,
            estimate=self.estimator.estimate(), rtt_s=self.estimator.rtt_s, compute=gaps,
            startup=self.compute_model.startup(self.model),
            decode_s={lvl: self.compute_model.decode_s(lvl, self._mean_size[lvl]) for lvl in self._levels},
            compute_start=self.timeline.compute_start, last_consumed=self.kv.last_consumed,
            template_compute=template_s, computed=[j for j, d in enumerate(self._loop.decided) if d == COMPUTE],
            ahead=self._loop.ahead, downloads=self.fetcher.in_flight(),
            can_compute=can_compute and self._may_compute(index), hashes_bytes=self.fetcher.hashes.pending_bytes,
            window=self.max_ahead, pass_shards=self._loop.pass_shards,
        )

    def _may_compute(self, index: int) -> bool:
        """Shard ``index`` can still be left to the phone: every shard from the frontier of the
        template pass up to it is computed or left to the phone already."""
        if self.template is None or index < self.template.frontier:
            return False
        return all(decided == COMPUTE for decided in self._loop.decided[self.template.pass_frontier(index):index])

    def fetch_due(self, index: int, waiting_since: float) -> Due:
        """When shard ``index``, which the model has waited for since ``waiting_since``, would be
        decoded if it is fetched (the compute stage's extend rule,
        :func:`~sakura.edge_client.late_download.fetch_due`)."""
        timing = self.timeline.shards[index]
        ctx = self.context(index, can_compute=False)
        level = timing.level or self._levels[0]
        received = self.fetcher.received(index)
        left = self.fetcher.remaining(index)  # of the download in progress, at the level it is at
        waiting = self._waits.setdefault(index, Waiting(waiting_since, received))
        later = fewest_bytes(ctx.shards, index + 1, ctx.pass_end(index))
        return judge_download(self.clock(), requested_at=timing.requested_at, rtt_s=ctx.rtt_s,
                              planned_rate=planned_rate(ctx), received=received,
                              left=max(0, ctx.size(level) - received) if left is None else left, later=later,
                              decode_s=ctx.decode_s.get(level, 0.0), waiting=waiting)

    # -- decode --------------------------------------------------------------------------
    def _decode_stage(self) -> None:
        while True:
            item = self._get(self._encoded)
            if item is None:
                return
            index, level, data = item
            if level == COMPUTE:
                continue
            self.timeline.shards[index].decode_started_at = self.clock()
            started = time.perf_counter()
            geometry = self.limits.geometry
            try:
                pair = decode_shard(data, expected_shape=geometry.shape, expected_dtype=geometry.dtype,
                                    max_output_bytes=self.limits.max_output_bytes, factored=self.factored)
            except CodecError as exc:
                why = f"shard {index} ({level}) passed its sha256 but does not decode: {exc}"
                if self.computes_instead(index, why):
                    continue
                raise CodecError(why) from None
            seconds = time.perf_counter() - started
            self.compute_model.observe_decode(level, len(data), seconds)
            self.timeline.shards[index].decoded_at = self.clock()
            self.progress.tell("decoded", index)
            self.kv.offer(index, pair)

    # -- bounded hand-offs ---------------------------------------------------------------
    def _put(self, q: queue.Queue, item: object) -> None:
        while not self.stopped():
            try:
                q.put(item, timeout=POLL_S)
                return
            except queue.Full:
                continue

    def _get(self, q: queue.Queue):
        while not self.stopped():
            try:
                return q.get(timeout=POLL_S)
            except queue.Empty:
                continue
        return None
