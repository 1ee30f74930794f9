"""The timing model every level policy plans with (and the end-to-end simulator replays).

Shards are fetched one after another over one link, each request sent a round trip before the
previous response ends (so the link never idles between shards, as with HTTP request-ahead);
each is decoded when it has arrived and the decoder is free; the model consumes shard ``i`` when it is decoded and the compute stage has reached the
layer that needs it; it then computes for ``compute[i]`` seconds before it needs shard ``i + 1``.
Whenever a decoded shard is later than the compute stage, the compute stage stalls.

A plan's score is its importance-weighted quality minus ``stall_penalty`` per second of stall:
with the default penalty a millisecond of stall outweighs any quality gain, so "every shard
before its layer" comes first and quality second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

from sakura.edge_client.estimator import Estimate

#: (start time, bytes) -> seconds the link needs to deliver them.
TransferTime = Callable[[float, int], float]
DEFAULT_STALL_PENALTY = 1000.0


@dataclass(frozen=True)
class ShardOption:
    """One shard as a policy sees it: bytes to fetch per level (0 when cached) and its weight."""

    sizes: dict[str, int]
    weight: float = 1.0


@dataclass(frozen=True)
class PlanContext:
    """Everything a policy may know when it picks the level of shard ``index``.

    Times are seconds since the edit began. ``compute[i]`` is the predicted compute between
    consuming shard ``i`` and needing shard ``i + 1``; ``ready_at`` is when the compute stage is
    predicted to need shard ``index``.
    """

    now: float
    index: int
    levels: tuple[str, ...]  # smallest first
    shards: tuple[ShardOption, ...]
    utility: dict[str, float]
    estimate: Estimate | None
    rtt_s: float
    compute: tuple[float, ...]
    decode_s: dict[str, float]
    ready_at: float
    decode_free_at: float = 0.0
    #: When the link finishes the response in flight (``now`` when idle).
    link_free_at: float | None = None

    def size(self, level: str, index: int | None = None) -> int:
        return self.shards[self.index if index is None else index].sizes[level]

    def cached(self, index: int | None = None) -> list[str]:
        """Levels of the shard that cost nothing to fetch, smallest first."""
        shard = self.shards[self.index if index is None else index]
        return [lvl for lvl in self.levels if shard.sizes[lvl] == 0]


@dataclass
class PlanState:
    """Where the pipeline stands while a plan is simulated."""

    fetch_free: float  # the link is free from here
    decode_free: float
    ready: float
    next_request: float = 0.0  # the next request can be sent from here
    quality: float = 0.0
    stall: float = 0.0

    def score(self, penalty: float) -> float:
        return self.quality - penalty * self.stall


def start_state(ctx: PlanContext) -> PlanState:
    link_free = ctx.now if ctx.link_free_at is None else max(ctx.now, ctx.link_free_at)
    return PlanState(fetch_free=link_free, decode_free=max(ctx.decode_free_at, ctx.now), ready=ctx.ready_at,
                     next_request=ctx.now)


def advance(state: PlanState, ctx: PlanContext, index: int, level: str, transfer: TransferTime) -> PlanState:
    """The state after shard ``index`` is fetched at ``level``, decoded and consumed."""
    size = ctx.shards[index].sizes[level]
    next_request = state.next_request
    if size:
        begin = max(state.fetch_free, state.next_request + ctx.rtt_s)
        arrival = begin + transfer(begin, size)
        next_request = max(next_request, arrival - ctx.rtt_s)
    else:
        arrival = state.fetch_free
    decoded = max(arrival, state.decode_free) + ctx.decode_s.get(level, 0.0)
    consumed = max(decoded, state.ready)
    return PlanState(
        fetch_free=arrival,
        decode_free=decoded,
        next_request=next_request,
        ready=consumed + ctx.compute[index],
        quality=state.quality + ctx.shards[index].weight * ctx.utility[level],
        stall=state.stall + max(0.0, decoded - state.ready),
    )


def simulate(ctx: PlanContext, plan: Sequence[str], transfer: TransferTime) -> PlanState:
    state = start_state(ctx)
    for offset, level in enumerate(plan):
        state = advance(state, ctx, ctx.index + offset, level, transfer)
    return state


def constant_rate(bytes_per_s: float) -> TransferTime:
    rate = max(bytes_per_s, 1.0)
    return lambda _start, nbytes: nbytes / rate


def level_utility(level_bytes: dict[str, int]) -> dict[str, float]:
    """Quality of each level: 1 + ln(its size / the smallest level's), the log-rate utility of
    adaptive streaming (diminishing returns per extra byte)."""
    smallest = max(1, min(level_bytes.values()))
    return {name: 1.0 + math.log(max(size, smallest) / smallest) for name, size in level_bytes.items()}


def normalised_weights(weights: Sequence[float]) -> list[float]:
    """Shard weights scaled to mean 1 (all 1 when unknown or all zero)."""
    total = sum(weights)
    if total <= 0:
        return [1.0] * len(weights)
    return [w * len(weights) / total for w in weights]
