"""The live pipeline's decoder and model behind their bounded queues, as the simulator replays them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from sakura.edge_client.planning import MAX_AHEAD
from sakura.edge_client.timeline import ShardTiming, Timeline

if TYPE_CHECKING:
    from sakura.evaluation.simulator import EditSimulator


class PipelineStages:
    """The live pipeline's decoder and model behind its bounded queues, ``MAX_AHEAD`` deep: a
    download handed over waits while ``MAX_AHEAD`` encoded shards wait for the decoder; the decoder
    takes shard ``k`` once it has handed ``k - 1`` to the model, which it can only do while fewer
    than ``MAX_AHEAD`` decoded shards wait there (:meth:`StreamingKV.offer`)."""

    def __init__(self, sim: "EditSimulator", edit: Timeline,
                 extend: Callable[[Timeline, ShardTiming, float], bool] | None = None) -> None:
        self.sim, self.edit, self.extend = sim, edit, extend
        self.offered: list[float] = []  # per shard handed over: when the decoder gave it to the model

    @property
    def decode_free(self) -> float:
        return self.offered[-1] if self.offered else self.edit.compute_start

    def hand_over(self, shard: ShardTiming, t: float) -> float:
        """The fetch stage, free at ``t``, hands the download ``shard`` to the decoder; then the
        decoder and the model take it in turn. Returns when the fetch stage is free again."""
        k, done = shard.index, self.edit.shards
        if shard.computed:  # left to the phone: no download, no decode
            self.offered.append(self.decode_free)
            self.sim._consume(self.edit, shard, t)
            return t
        put = max(t, shard.arrived_at)
        if k >= MAX_AHEAD and done[k - MAX_AHEAD].decode_started_at is not None:  # None: computed
            put = max(put, done[k - MAX_AHEAD].decode_started_at)
        shard.decode_started_at = max(put, self.decode_free)
        shard.decoded_at = shard.decode_started_at + self.sim.g.decode_s[shard.level][k]
        offered = shard.decoded_at if k < MAX_AHEAD else max(shard.decoded_at, done[k - MAX_AHEAD].consumed_at)
        self.offered.append(offered)
        if self.extend is not None and self.extend(self.edit, shard, self.sim._needed(self.edit, k)):
            shard.decode_started_at = shard.decoded_at = None
        self.sim._consume(self.edit, shard, offered)
        return put

