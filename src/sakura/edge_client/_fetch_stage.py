"""The edit pipeline's fetch stage: the mechanics under the shared fetch loop.

:class:`~sakura.edge_client.fetch_loop.FetchLoop` decides which shard to request next, when, at
which level, which to leave to the phone and which to take back (``docs/architecture.md``, the
fetch stage); the simulator drives it too. This stage is its live
:class:`~sakura.edge_client.fetch_loop.FetchDriver`: a thread of the
:class:`~sakura.edge_client._pipeline.EditPipeline`, a real link and a real model. Requests go
out in order, each once the one before is within a round trip of done (on another kept-alive
connection, at most ``max_in_flight`` at once), so the link does not idle for a round trip between
shards; each download runs on a pool thread of its own, and is handed to the decoder as soon as
it is complete, lowest shard first (the loop's order: the model's). A download the policy
abandons goes on at a smaller level; one of a shard the phone computed meanwhile is stopped. A
download that the link or the server lets down fails the edit, unless the phone can still compute
the shard (the pipeline's fallback); after the first such, no request leaves.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from typing import Protocol

from sakura.edge_client._compute_model import ComputeModel
from sakura.edge_client._fetcher import ShardFetcher
from sakura.edge_client._http.deadlines import EitherFlag
from sakura.edge_client._progress import ProgressTeller
from sakura.edge_client._streaming_kv import POLL_S, StreamingKV
from sakura.edge_client._template_kv import TemplateComputer
from sakura.edge_client.errors import (
    EdgeError,
    PolicyError,
    RedirectError,
    ServerError,
    ShardCorrupt,
    TransportError,
)
from sakura.edge_client.fetch_loop import FETCH, FetchLoop
from sakura.edge_client.planning import COMPUTE, PlanContext
from sakura.edge_client.policy import LevelPolicy
from sakura.edge_client.timeline import Timeline

#: What a download fails with when the link or the server lets the edit down (not a cancel, a
#: closed session or a bug): a phone that can compute the shard does so instead.
_LET_DOWN = (TransportError, ServerError, ShardCorrupt, RedirectError)
#: How often the fetch stage, waiting for its last request to near its end, looks whether the
#: first download in flight is complete (to hand it to the decoder at once; an estimate: small
#: against a shard's decode and compute, cheap as a wake-up).
HAND_OVER_POLL_S = 0.005


class Pipeline(Protocol):
    """What the fetch stage needs of the pipeline around it (:class:`~sakura.edge_client._pipeline.EditPipeline`)."""

    fetcher: ShardFetcher
    policy: LevelPolicy
    clock: Callable[[], float]
    cancel: threading.Event
    compute_model: ComputeModel
    model: str
    template: TemplateComputer | None
    kv: StreamingKV
    timeline: Timeline
    progress: ProgressTeller
    #: Shards whose download failed, which the phone computes instead.
    failed: set[int]

    def stopped(self) -> bool:
        """The edit failed or was cancelled."""

    def fail(self, exc: BaseException) -> None:
        """Stop every stage with ``exc`` (the first error wins)."""

    def context(self, index: int, *, can_compute: bool = True) -> PlanContext:
        """What the policy knows now about shard ``index`` and those after it."""

    def computes_instead(self, index: int, why: str) -> bool:
        """Leave shard ``index``, whose download failed (``why``), to the phone if it can still compute it."""

    def to_decoder(self, item: tuple[int, str, bytes]) -> None:
        """Queue a download (or ``COMPUTE`` for a shard the phone computes) for the decode stage."""


class FetchStage:
    """One edit's fetch stage: ``loop``'s driver, requesting ``levels`` of the pipeline's shards
    until the pipeline's ``stop`` is set (or its edit cancelled)."""

    def __init__(self, pipeline: Pipeline, loop: FetchLoop, levels: tuple[str, ...], stop: threading.Event) -> None:
        self.p, self.loop, self.levels, self._stop = pipeline, loop, levels, stop
        self._abort = EitherFlag(pipeline.cancel, stop)  # what downloads in flight watch
        #: Per shard being downloaded: set when the phone computed it, which stops the download.
        self._superseded: dict[int, threading.Event] = {}
        self._downloads: dict[int, tuple[Future, threading.Event]] = {}  # requested, not handed over
        self._pool: ThreadPoolExecutor | None = None

    def run(self) -> None:
        """Requests go out in order, each once the one before is within a round trip of done, with
        at most ``max_in_flight`` outstanding (small shards on a long link need several in flight
        to keep it busy); responses are handed to the decoder lowest shard first."""
        self._pool = ThreadPoolExecutor(max_workers=self.loop.max_in_flight, thread_name_prefix="sakura-download")
        try:
            first = self.p.fetcher.first_level
            for index in self.loop.in_flight:  # asked for with the preamble (so ``first`` is set): on its way
                self._submit(index, first or self.levels[0])
            self.loop.run(self)
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)  # downloads still running are being aborted

    def supersede(self, index: int) -> None:
        """The phone computed shard ``index``: stop its download."""
        self._superseded.setdefault(index, threading.Event()).set()

    # -- the FetchDriver -------------------------------------------------------------------
    def stopped(self) -> bool:
        return self.p.stopped()

    def computed(self, index: int) -> bool:
        return self.p.kv.computed(index)

    def await_template_cost(self) -> None:
        """Plan past the first computed block only once what a block costs this phone is known
        (a fresh phone computes the first to learn it)."""
        while not self._template_known() and not self.p.stopped():
            self._stop.wait(POLL_S)

    def await_model(self, index: int) -> None:
        p = self.p
        with p.kv.cond:
            while p.timeline.shards[index].needed_at is None and not p.stopped():
                p.kv.cond.wait(POLL_S)

    def template_timed(self, near: int | None) -> bool:
        if near is not None:
            future, near_done = self._downloads[near]
            while not self._template_known() and not near_done.wait(HAND_OVER_POLL_S) and not future.done() \
                    and not self.stopped():
                continue
        return self._template_known()

    def _template_known(self) -> bool:
        return bool(self.p.compute_model.template_s(self.p.model, self.loop.shards))

    def choose(self, index: int, *, can_compute: bool) -> str:
        choice = self.p.policy.choose(self.p.context(index, can_compute=can_compute))
        return choice if can_compute else self._known(choice, "chose")

    def take_back(self, first: int, top: int) -> str | None:
        level = self.p.policy.take_back(self.p.context(first), top)  # type: ignore[attr-defined]
        return None if level is None else self._known(level, "took back")

    def leave_to_phone(self, index: int) -> None:
        """The compute stage computes it when the model asks for it."""

    def left_to_phone(self) -> list[int]:
        """The shards left to the phone that the compute stage has not asked for yet."""
        return [i for i, decided in enumerate(self.loop.decided)
                if decided == COMPUTE and self.p.timeline.shards[i].needed_at is None]

    def claim(self, index: int) -> bool:
        """Fetch shard ``index`` after all, unless the compute stage has asked for it already (it
        decides under the same lock whether to compute it)."""
        p = self.p
        with p.kv.cond:
            if p.timeline.shards[index].needed_at is not None or p.template is None \
                    or index < p.template.frontier:
                return False
            self.loop.decided[index] = FETCH
            return True

    def request(self, index: int, level: str, *, taken_back: bool) -> None:
        self.p.timeline.shards[index].taken_back = taken_back
        self._submit(index, level)

    def wait_near_done(self, index: int, head: int) -> bool:
        future, near_done = self._downloads[index]
        first = self._downloads[head][0]
        while not near_done.wait(HAND_OVER_POLL_S) and not future.done() and not first.done() \
                and not self.stopped():
            continue
        return near_done.is_set() or future.done()

    def arrived(self, index: int) -> bool:
        return self._downloads[index][0].done()

    def hand_over(self, index: int) -> None:
        future = self._downloads.pop(index)[0]
        while not future.done() and not self.stopped():
            futures_wait([future], timeout=POLL_S)
        if not self.stopped():
            self.p.to_decoder(future.result())

    release = hand_over  # the decoder takes shards in the model's order anyway: this stage waits

    def catch_up(self) -> None:
        """The compute stage runs on its own."""

    def finish_left(self) -> None:
        """The compute stage computes them when the model asks."""

    # -- downloads -------------------------------------------------------------------------
    def _submit(self, index: int, level: str) -> None:
        self.p.timeline.shards[index].chosen_at = self.p.clock()
        near_done = threading.Event()
        assert self._pool is not None, "requests leave from the fetch stage"
        if self.p.failed and self.p.computes_instead(index, "not requested: an earlier download of this edit failed"):
            near_done.set()
            future: Future = Future()
            future.set_result((index, COMPUTE, b""))
            self._downloads[index] = (future, near_done)
            return
        future = self._pool.submit(self._fetch_one, index, near_done, level)
        future.add_done_callback(self._fail_fast)
        self._downloads[index] = (future, near_done)

    def _fail_fast(self, future: Future) -> None:
        """A download failed: stop everything now, not when its turn to be handed over comes."""
        error = None if future.cancelled() else future.exception()
        if error is not None:
            self.p.fail(error)

    def _fetch_one(self, index: int, near_done: threading.Event, level: str) -> tuple[int, str, bytes]:
        p = self.p
        try:
            timing = p.timeline.shards[index]
            if index == 0 and p.fetcher.first_level is not None:  # asked for with the preamble: on its way
                near_done.set()

            def abandon(current: str, received: int, rate: float) -> str | None:
                smaller = p.policy.abandon(p.context(index, can_compute=False), current, received, rate)
                return None if smaller is None else self._known(smaller, "switched to")

            superseded = self._superseded.setdefault(index, threading.Event())
            try:
                level, data = p.fetcher.fetch(index, level, timing, abandon, EitherFlag(self._abort, superseded),
                                              near_done)
            except EdgeError as exc:  # the phone computed it (which cancels the download), or a failure
                computed = p.kv.computed(index)
                if not (computed or isinstance(exc, _LET_DOWN) and p.computes_instead(index, f"{exc}")):
                    raise
                timing.bytes += p.fetcher.received(index)
                return index, COMPUTE, b""
            timing.level = level
            p.progress.tell("fetched", index)
            return index, level, data
        finally:
            near_done.set()

    def _known(self, level: object, verb: str) -> str:
        if level not in self.levels:
            raise PolicyError(f"policy {self.p.policy.name} {verb} level {level!r}; "
                              f"the template has {list(self.levels)}")
        return level
