"""Template KV that arrives while the model runs: the compute stage of the edit pipeline.

The model's replay loop reads shard ``i`` when the layer that needs it starts; it blocks until
the decoder has offered it (a *stall*), or computes it on the phone instead when the shard was
left to the phone or its download would end later than computing it; while it waits, the phone
runs the template pass it began on towards it (:mod:`sakura.edge_client.late_download`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from sakura.edge_client._compute_model import ComputeModel
from sakura.edge_client._progress import ProgressTeller
from sakura.edge_client._template_kv import TemplateComputer
from sakura.edge_client.device import Device
from sakura.edge_client.errors import EditCancelled
from sakura.edge_client.late_download import LATE_CHECK_S, Due, climbs, computes_instead, next_check
from sakura.edge_client.planning import COMPUTE
from sakura.edge_client.timeline import Stall, Timeline
from sakura.platform.kv import KVPair, KVShard, ShardKey
from sakura.platform.manifest import PhoneManifest

_WAIT, _CLIMB, _COMPUTE = "wait", "climb", "compute"  # what the phone does while the model waits

#: How often a blocked stage wakes to check for errors, cancels and stops (and the compute stage
#: re-judges a late download).
POLL_S = LATE_CHECK_S


class Pipeline(Protocol):
    """What the compute stage needs of the pipeline around it (:class:`~sakura.edge_client._pipeline.EditPipeline`)."""

    manifest: PhoneManifest
    clock: Callable[[], float]
    timeline: Timeline
    cancel: threading.Event
    template: TemplateComputer | None
    compute_model: ComputeModel
    device: Device
    model: str
    progress: ProgressTeller

    @property
    def error(self) -> BaseException | None:
        """The first error of any stage (None while there is none)."""

    def stopped(self) -> bool:
        """The edit failed or was cancelled."""

    def planned_compute(self, index: int) -> bool:
        """The fetch stage left shard ``index`` to the phone."""

    def fetch_due(self, index: int, waiting_since: float) -> Due:
        """When shard ``index``, which the model has waited for since ``waiting_since``, would be
        decoded if it is fetched."""

    def supersede(self, index: int) -> None:
        """The phone computed shard ``index``: stop its download."""


class StreamingKV:
    """Template KV that arrives while the model runs: ``kv[key]`` blocks until that shard is decoded."""

    def __init__(self, pipeline: Pipeline, max_ahead: int) -> None:
        m = pipeline.manifest
        self.pipeline, self.max_ahead = pipeline, max_ahead
        self.model_fingerprint = m.model.fingerprint
        self._keys = [s.key for s in m.shards]
        self._index = {key: i for i, key in enumerate(self._keys)}
        self._tokens = m.tokens.template
        self._ready: dict[int, KVShard] = {}
        self._computed: set[int] = set()
        self._last: tuple[int, float] | None = None  # last consumed shard, when
        self.cond = threading.Condition()

    @property
    def keys(self) -> list[ShardKey]:
        return list(self._keys)

    @property
    def template_tokens(self) -> int:
        return self._tokens

    def computed(self, index: int) -> bool:
        with self.cond:
            return index in self._computed

    def offer(self, index: int, pair: KVShard) -> None:
        """Decode stage: hand a shard over, waiting while the model is ``max_ahead`` shards behind."""
        p = self.pipeline
        with self.cond:
            while len(self._ready) >= self.max_ahead and not p.stopped():
                self.cond.wait(POLL_S)
            if index not in self._computed:
                self._ready[index] = pair
            self.cond.notify_all()

    def __getitem__(self, key: ShardKey) -> KVShard:
        p = self.pipeline
        index = self._index[key]
        if p.cancel.is_set():  # between two layers, even when every shard is ready
            raise EditCancelled("the edit was cancelled")
        self._account_compute(index)
        asked = p.clock()
        with self.cond:  # from here the fetch stage no longer takes this shard back from the phone
            p.timeline.shards[index].needed_at = asked
        while True:  # re-judged while waiting: the download may slow down
            judged, wake_at = self._judge(index, asked)
            if judged == _CLIMB:
                p.template.climb(index)  # type: ignore[union-attr]
                continue
            if judged == _COMPUTE:
                waited = p.clock()
                if waited - asked > 1e-4:  # it waited for the download before giving up on it
                    p.timeline.stalls.append(Stall(index, asked, waited))
                return self._compute(index)
            with self.cond:
                if index not in self._ready:
                    if p.error is not None:
                        raise p.error
                    if p.cancel.is_set():
                        raise EditCancelled("the edit was cancelled")
                    self.cond.wait(max(0.0, wake_at - p.clock()))
                    continue
                pair = self._ready.pop(index)
                self.cond.notify_all()
                break
        got = p.clock()
        if got - asked > 1e-4:
            p.timeline.stalls.append(Stall(index, asked, got))
        p.timeline.shards[index].consumed_at = got
        self._last = (index, got)
        return pair

    def _judge(self, index: int, asked: float) -> tuple[str, float]:
        """What the phone does while the model waits for shard ``index`` (asked for at ``asked``):
        compute it here (left to the phone, or its download would end later than computing it),
        climb (run its pass one block on towards it,
        :func:`~sakura.edge_client.late_download.climbs`), or wait; and, to wait, until when at
        most (:func:`~sakura.edge_client.late_download.next_check`; a shard handed over wakes it sooner)."""
        p = self.pipeline
        poll = p.clock() + POLL_S
        if p.template is None or index < p.template.frontier:
            return _WAIT, poll
        with self.cond:
            if index in self._ready:
                return _WAIT, poll
        if p.planned_compute(index):
            return _COMPUTE, poll
        template, known = p.template, p.compute_model.template_s(p.model, len(self._keys))
        at_frontier = template.reaches(index)
        if not known and not at_frontier:
            return _WAIT, poll  # what computing costs is learnt at the frontier first
        due, now, costs = p.fetch_due(index, asked), p.clock(), template.block_costs(known)
        begun, block_s = template.begun(index), None
        if not at_frontier:
            block_s = costs[template.pass_frontier(index)]
            if climbs(due, now, block_s=block_s, begun=begun, waited=now - asked,
                      pass_s=template.rest_s(index, costs)):
                return _CLIMB, poll
        compute_s = template.cost_s(index, costs)
        if computes_instead(due, now, waited=now - asked, compute_s=compute_s):
            return _COMPUTE, poll
        return _WAIT, next_check(now, asked=asked, compute_s=compute_s, block_s=None if begun else block_s)

    def _compute(self, index: int) -> KVPair:
        p = self.pipeline
        pair = p.template.compute(index)  # type: ignore[union-attr]
        with self.cond:
            self._computed.add(index)
            self._ready.pop(index, None)
            self.cond.notify_all()
        p.supersede(index)
        got = p.clock()
        timing = p.timeline.shards[index]
        timing.level, timing.source, timing.consumed_at, timing.decoded_at = COMPUTE, "computed", got, got
        self._last = (index, got)
        p.progress.tell("computed", index)
        return pair

    def _account_compute(self, index: int) -> None:
        """Teach the compute model the time since the previous shard (or the start)."""
        p = self.pipeline
        now = p.clock()
        since = self._last[1] if self._last else p.timeline.compute_start
        p.device.after_compute(now - since)
        elapsed = p.clock() - since
        if self._last is None:
            p.compute_model.observe_startup(p.model, elapsed)
        else:
            p.compute_model.observe_gap(p.model, self._last[0], elapsed)

    def finish(self) -> None:
        """The model is done: account the compute after the last shard."""
        if self._last is not None:
            self._account_compute(len(self._keys))

    @property
    def last_consumed(self) -> tuple[int, float] | None:
        """The last shard the model consumed, and when (None before the first)."""
        return self._last
