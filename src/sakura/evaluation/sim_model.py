"""The model of a simulated edit: when it asks for each shard, when it takes it, and what the
phone computes of the template pass (:class:`~sakura.evaluation.simulator.EditSimulator`)."""

from __future__ import annotations

from collections.abc import Sequence

from sakura.edge_client.planning import COMPUTE, with_preparation
from sakura.edge_client.timeline import ShardTiming, Stall, Timeline
from sakura.evaluation.geometry import EditGeometry

__all__ = ["SimulatedModel", "consumed"]


def consumed(shard: ShardTiming) -> float:
    """When the model took ``shard`` (set once it is in the edit's shards)."""
    assert shard.consumed_at is not None, f"shard {shard.index} was not consumed"
    return shard.consumed_at


class SimulatedModel:
    """The model's replay loop over ``geometry``, and the template pass the phone computes (its
    *frontier*: the blocks of the pass computed so far). ``cold``: the phone has never computed a
    block, so it knows nothing of what one costs until it has."""

    def __init__(self, geometry: EditGeometry, *, cold: bool) -> None:
        self.g, self.cold = geometry, cold
        self.frontier = 0
        #: The source still to be made from the template's image before the first computed block:
        #: (its seconds, the seconds the phone predicts for it), both 0 once made or when none.
        self.prepare = (0.0, 0.0)

    def reset(self) -> None:
        """A new edit starts."""
        self.frontier, self.prepare = 0, (0.0, 0.0)

    def pass_start(self, index: int) -> int:
        """The first shard of the pass shard ``index`` belongs to."""
        return index - index % self.g.shards_per_step

    def template_s(self, done: Sequence[ShardTiming], *, shared: bool = False) -> tuple[float, ...]:
        """What the phone knows of its template compute: all of it, or (cold) nothing until it
        computed a block; the source still to make is on the first block of each pass, as the
        live ``TemplateComputer.block_costs`` has it (``shared``: the planner's share)."""
        if self.cold and not any(s.computed for s in done):
            return ()
        return with_preparation(tuple(self.g.shard_compute_s), self.prepare[1], self.g.shards_per_step, shared=shared)

    def climb(self, at: float, index: int) -> float:
        """The phone, waiting for shard ``index``'s download from ``at``, runs its template pass one
        block on from its frontier (below ``index``: its KV fetched, only its output kept), starting
        the pass (and making the source first) where it has not begun; returns when that block is done."""
        frontier = max(self.frontier, self.pass_start(index))
        done = at + self.prepare[0] + self.g.shard_compute_s[frontier]
        self.frontier, self.prepare = frontier + 1, (0.0, 0.0)
        return done

    def needed(self, edit: Timeline, index: int) -> float:
        """When the model asks for shard ``index``: after its compute since the previous one (or the start)."""
        before = edit.shards[-1] if edit.shards else None
        if before is None:
            return edit.compute_start + self.g.startup_s
        return consumed(before) + self.g.gaps_s[index - 1]

    def consume(self, edit: Timeline, shard: ShardTiming, available: float, *,
                computes_from: float | None = None) -> None:
        """The model asks for ``shard`` after its compute since the previous one (or the start) and
        takes it once ``available``; the wait between is a stall. A shard the phone computes is
        taken once computed, as the live pipeline records it: from the frontier of its pass
        through its block, the blocks below it computed on the way. ``computes_from``: the phone
        waited for the shard's download until then before computing it instead (a stall too)."""
        i = shard.index
        shard.needed_at = self.needed(edit, i)
        start = shard.needed_at if computes_from is None else max(shard.needed_at, computes_from)
        if shard.level != COMPUTE:  # fetched (or computed before the model ran: CacheGen's fallback)
            shard.consumed_at = max(available, shard.needed_at)
        else:
            frontier = max(self.frontier, self.pass_start(i))
            shard.consumed_at = shard.decoded_at = (start + self.prepare[0]
                                                    + sum(self.g.shard_compute_s[frontier:i + 1]))
            self.frontier, self.prepare = i + 1, (0.0, 0.0)
        if shard.level != COMPUTE and shard.consumed_at > shard.needed_at:
            edit.stalls.append(Stall(i, shard.needed_at, shard.consumed_at))
        elif start > shard.needed_at:  # waited for a download, then computed it
            edit.stalls.append(Stall(i, shard.needed_at, start))
        edit.shards.append(shard)
        edit.compute_end = shard.consumed_at + self.g.gaps_s[i]
