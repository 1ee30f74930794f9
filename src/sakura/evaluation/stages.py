"""The live pipeline's decoder and model behind their bounded queues, as the simulator replays them."""

from __future__ import annotations

from collections.abc import Callable

from sakura.edge_client.planning import MAX_AHEAD
from sakura.edge_client.timeline import ShardTiming, Timeline
from sakura.evaluation.sim_link import arrived
from sakura.evaluation.sim_model import SimulatedModel, consumed

#: The compute stage's extend rule: (the edit, a fetched shard, when the model asks for it) ->
#: (when the phone starts computing it instead, or None to wait for its download; when the phone
#: is done with the template blocks it ran on while it waited).
Extend = Callable[[Timeline, ShardTiming, float], tuple[float | None, float]]


class PipelineStages:
    """The live pipeline's decoder and model behind its bounded queues, ``window`` deep
    (:func:`~sakura.edge_client.planning.stage_window`): a download handed over waits while
    ``window`` encoded shards wait for the decoder; the decoder takes the downloads in the order
    they were handed over, and hands each to the model only while fewer than ``window`` decoded
    shards wait there (:meth:`StreamingKV.offer`); the model takes shards in index order, so one
    handed over before those below it (taken back from the phone) waits for them."""

    def __init__(self, model: SimulatedModel, edit: Timeline, extend: Extend | None = None,
                 window: int = MAX_AHEAD) -> None:
        self.model, self.edit, self.extend, self.window = model, edit, extend, window
        self.offered: list[float] = []  # per shard handed over: when the decoder gave it to the model
        self._waiting: dict[int, tuple[ShardTiming, float]] = {}  # handed over, below them still to come

    @property
    def decode_free(self) -> float:
        return self.offered[-1] if self.offered else self.edit.compute_start

    @property
    def next_needed(self) -> float:
        """When the model asks for the next shard it has not taken."""
        return self.model.needed(self.edit, len(self.edit.shards))

    def hand_over(self, shard: ShardTiming, t: float) -> float:
        """The fetch stage, free at ``t``, hands the download ``shard`` to the decoder; then the
        decoder and the model take it in turn. Returns when the fetch stage is free again."""
        k, done, w = shard.index, self.edit.shards, self.window
        if shard.computed:  # left to the phone: no download, no decode
            self.offered.append(self.decode_free)
            self._take(shard, t)
            return t
        put = max(t, arrived(shard))
        before = done[k - w] if k >= w else None  # the shard ``window`` ahead of it
        if before is not None and before.decode_started_at is not None:  # None: computed
            put = max(put, before.decode_started_at)
        shard.decode_started_at = max(put, self.decode_free)
        shard.decoded_at = shard.decode_started_at + self.model.g.decode_s[shard.level][k]
        offered = shard.decoded_at if before is None else max(shard.decoded_at, consumed(before))
        self.offered.append(offered)
        self._take(shard, offered)
        return put

    def _take(self, shard: ShardTiming, available: float) -> None:
        """The model takes every shard handed over whose turn has come, in index order."""
        self._waiting[shard.index] = (shard, available)
        while len(self.edit.shards) in self._waiting:
            shard, available = self._waiting.pop(len(self.edit.shards))
            computes_from = None
            if not shard.computed and self.extend is not None:
                computes_from, busy = self.extend(self.edit, shard, self.next_needed)
                available = max(available, busy)
                if computes_from is not None:
                    shard.decode_started_at = shard.decoded_at = None
            self.model.consume(self.edit, shard, available, computes_from=computes_from)
