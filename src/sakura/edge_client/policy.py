"""Level policies: which representation of the next shard to fetch.

Every policy implements :class:`LevelPolicy`. They are pure functions of a
:class:`~sakura.edge_client.planning.PlanContext` (no clocks, no I/O), so the live pipeline and
the end-to-end simulator run the same code. Register new ones with :func:`register_policy`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from sakura.edge_client.errors import PolicyError
from sakura.edge_client.estimator import Estimate
from sakura.edge_client.planning import (
    COMPUTE,
    DEFAULT_STALL_PENALTY,
    PlanContext,
    PlanState,
    TransferTime,
    advance,
    best_split,
    constant_rate,
    start_state,
    take_back,
)

#: Conservative guess before anything was measured: a slow 3G link, in bytes/s.
COLD_START_BYTES_PER_S = 100_000.0


def planned_rate(ctx: PlanContext) -> float:
    """The bandwidth to plan with: the estimator's (error-discounted) rate, or the cold guess."""
    return ctx.estimate.bytes_per_s if ctx.estimate is not None else COLD_START_BYTES_PER_S


class LevelPolicy(Protocol):
    name: str

    def choose(self, ctx: PlanContext) -> str:
        """The level to fetch shard ``ctx.index`` at."""

    def abandon(self, ctx: PlanContext, level: str, received: int, rate: float) -> str | None:
        """Mid-download of ``level`` (``received`` bytes so far, arriving at ``rate`` bytes/s):
        a smaller level to switch to, or None to carry on."""


class FixedPolicy:
    """Always the same level (or a better one already in the cache); never abandons."""

    def __init__(self, level: str) -> None:
        self.level = level
        self.name = f"fixed-{level}"

    def choose(self, ctx: PlanContext) -> str:
        if self.level not in ctx.levels:
            raise PolicyError(f"policy {self.name}: the template has levels {list(ctx.levels)}, not {self.level!r}")
        rank = ctx.levels.index(self.level)
        better_cached = [lvl for lvl in ctx.cached() if ctx.levels.index(lvl) >= rank]
        return better_cached[-1] if better_cached else self.level

    def abandon(self, ctx: PlanContext, level: str, received: int, rate: float) -> str | None:
        return None


class _Adaptive:
    """Shared by the adaptive policies: the bandwidth to plan with, a quality floor
    (``min_level``: never fetch below it, e.g. for faces), and mid-download abandonment."""

    name = "adaptive"
    #: Abandon only when the smaller level lands at least this much sooner.
    abandon_gain = 0.25
    min_level: str | None = None

    @property
    def speculates(self) -> bool:
        """A session that knows no rate asks for shard 0 at the smallest level with the preamble
        (:mod:`~sakura.edge_client._first_shard`): what these policies pick then, unless floored."""
        return self.min_level is None

    def _floored(self, ctx: PlanContext) -> PlanContext:
        if self.min_level is None:
            return ctx
        if self.min_level not in ctx.levels:
            raise PolicyError(f"policy {self.name}: the template has levels {list(ctx.levels)}, not {self.min_level!r}")
        return replace(ctx, levels=ctx.levels[ctx.levels.index(self.min_level):])

    def cheapest(self, ctx: PlanContext) -> str:
        """The level of shard ``ctx.index`` with the fewest bytes to fetch (within the floor; the
        better one on ties, such as two cached)."""
        ctx = self._floored(ctx)
        return min(reversed(ctx.levels), key=ctx.size)

    def abandon(self, ctx: PlanContext, level: str, received: int, rate: float) -> str | None:
        ctx = self._floored(ctx)
        rank = ctx.levels.index(level)
        if rank == 0 or rate <= 0:
            return None
        projected = ctx.now + (ctx.size(level) - received) / rate
        if projected <= ctx.ready_at:
            return None  # still on time
        for smaller in reversed(ctx.levels[:rank]):
            alternative = ctx.now + ctx.rtt_s + ctx.size(smaller) / rate
            if alternative <= ctx.ready_at or smaller == ctx.levels[0]:
                if alternative < ctx.now + (projected - ctx.now) * (1 - self.abandon_gain):
                    return smaller
                return None
        return None


class ThroughputPolicy(_Adaptive):
    """The classic rate rule: the largest level that arrives, at the estimated throughput times
    ``safety``, before the compute stage needs it; the smallest when none does."""

    def __init__(self, safety: float = 0.9, min_level: str | None = None) -> None:
        self.safety, self.name, self.min_level = safety, "throughput", min_level

    def choose(self, ctx: PlanContext) -> str:
        ctx = self._floored(ctx)
        rate = planned_rate(ctx) * self.safety
        budget = ctx.ready_at - ctx.now
        fitting = [lvl for lvl in ctx.levels if ctx.size(lvl) == 0 or ctx.rtt_s + ctx.size(lvl) / rate <= budget]
        return fitting[-1] if fitting else ctx.levels[0]


class RobustMPCPolicy(_Adaptive):
    """Deadline-aware robust MPC: plan the next ``horizon`` shards' levels to maximise
    importance-weighted quality with every shard decoded before its layer starts (stall is
    penalised per second), at the estimator's error-discounted bandwidth; apply the first."""

    def __init__(self, horizon: int = 5, stall_penalty: float = DEFAULT_STALL_PENALTY,
                 min_level: str | None = None) -> None:
        if horizon < 1:
            raise PolicyError("horizon must be >= 1")
        self.horizon, self.stall_penalty, self.name, self.min_level = horizon, stall_penalty, "mpc", min_level

    def choose(self, ctx: PlanContext) -> str:
        ctx = self._floored(ctx)
        transfer = constant_rate(planned_rate(ctx))
        last = min(ctx.index + self.horizon, len(ctx.shards))

        def best_score(state: PlanState, index: int) -> float:
            if index == last:
                return state.score(self.stall_penalty)
            return max(best_score(advance(state, ctx, index, lvl, transfer), index + 1) for lvl in ctx.levels)

        start = start_state(ctx, transfer)
        scores = [best_score(advance(start, ctx, ctx.index, lvl, transfer), ctx.index + 1) for lvl in ctx.levels]
        return ctx.levels[max(range(len(scores)), key=lambda i: (scores[i], -i))]


class HybridPolicy:
    """Compute or fetch each block: the phone computes the first shards of each pass of the
    reference tokens itself while the rest is fetched, at the split the timing model says ends
    soonest (:func:`~sakura.edge_client.planning.best_split`, at the inner policy's bandwidth);
    the fetched shards' levels are the inner policy's (robust MPC by default), but for a shard above
    blocks left to the phone that the link could still take back (``PlanContext.phone_before``):
    that one is fetched at the inner policy's level with the fewest bytes, because every byte more
    is link time the take-back could have spared the phone a block with (the earliest finish
    first, quality second). Where the phone cannot compute (no template source, or a model that
    cannot), it is the inner policy."""

    def __init__(self, inner: LevelPolicy | None = None, stall_penalty: float = DEFAULT_STALL_PENALTY,
                 min_level: str | None = None) -> None:
        self.inner = inner or RobustMPCPolicy(min_level=min_level)
        self.stall_penalty, self.name = stall_penalty, "hybrid"
        self.computes = True  # the session fetches the template's source for it

    def _transfer(self, ctx: PlanContext) -> TransferTime:
        """The link the split is planned on: the inner policy's own (an oracle's true one), else the estimate."""
        own = getattr(self.inner, "transfer", None)
        return own(ctx) if own is not None else constant_rate(planned_rate(ctx))

    def choose(self, ctx: PlanContext) -> str:
        if ctx.can_compute:
            if not ctx.template_compute:  # what a block costs is not known yet: compute one to learn it
                return COMPUTE
            if best_split(ctx, self._transfer(ctx), self.stall_penalty) > 0:
                return COMPUTE
        cheapest = getattr(self.inner, "cheapest", None)
        if ctx.phone_before and cheapest is not None:
            return cheapest(ctx)
        return self.inner.choose(ctx)

    def take_back(self, ctx: PlanContext, top: int) -> str | None:
        """Re-planning the other way: the level to fetch shard ``top`` at after all, though it was
        left to the phone with ``ctx.index..top - 1``, or None to keep computing them
        (:func:`~sakura.edge_client.planning.take_back`). None where what a block costs is not
        known yet: a fresh phone's first pass, left to it to time a block, is not probed."""
        if not ctx.template_compute:
            return None
        return take_back(ctx, top, self._transfer(ctx), self.stall_penalty)

    def abandon(self, ctx: PlanContext, level: str, received: int, rate: float) -> str | None:
        return self.inner.abandon(ctx, level, received, rate)


class OnDevicePolicy:
    """The phone alone: it computes every block of the template KV itself from the template's
    source and fetches none (the on-device baseline, run by the same client from the same state)."""

    name = "on-device"
    computes = True

    def choose(self, ctx: PlanContext) -> str:
        if not ctx.can_compute:
            raise PolicyError("policy on-device: this model or template cannot compute its template KV on the phone")
        return COMPUTE

    def abandon(self, ctx: PlanContext, level: str, received: int, rate: float) -> str | None:
        return None


PolicyFactory = Callable[..., LevelPolicy]
_POLICIES: dict[str, PolicyFactory] = {}


def register_policy(name: str, factory: PolicyFactory) -> None:
    if name in _POLICIES:
        raise PolicyError(f"policy {name!r} is already registered")
    _POLICIES[name] = factory


def policy_names() -> list[str]:
    return sorted(_POLICIES)


def make_policy(name: str, **kwargs: object) -> LevelPolicy:
    """A policy by name: ``hybrid`` (compute or fetch), ``mpc`` (fetch only), ``throughput``,
    ``fixed-<level>``, ``on-device`` (compute only), ``oracle`` (the hybrid knowing the future
    bandwidth: needs ``trace=``)."""
    if name.startswith("fixed-") and name not in _POLICIES:
        return FixedPolicy(name.removeprefix("fixed-"))
    try:
        factory = _POLICIES[name]
    except KeyError:
        raise PolicyError(f"unknown policy {name!r}; known: {policy_names() + ['fixed-<level>']}") from None
    return factory(**kwargs)


def can_take_back(policy: object) -> bool:
    """Whether ``policy`` re-plans a prefix left to the phone (it has a ``take_back``)."""
    return getattr(policy, "take_back", None) is not None


def asks_first_shard(policy: object, estimate: Estimate | None) -> bool:
    """Whether an edit asks for shard 0 with the preamble: an adaptive fetching policy (it starts
    at the smallest level while no rate is known, unless floored) in a session that knows no rate."""
    return bool(getattr(policy, "speculates", False)) and estimate is None


register_policy("mpc", RobustMPCPolicy)
register_policy("throughput", ThroughputPolicy)
register_policy("hybrid", HybridPolicy)
register_policy("on-device", OnDevicePolicy)

