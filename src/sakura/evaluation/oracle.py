"""The oracle level policy: handed the true future bandwidth, it plans every remaining shard (or a
window of them) by dynamic programming over the same timing model the other policies use (for
evaluation). Inside :class:`~sakura.edge_client.policy.HybridPolicy` it also splits compute from
fetch with the true bandwidth."""

from __future__ import annotations

from collections.abc import Callable

from sakura.edge_client.errors import PolicyError
from sakura.edge_client.planning import (
    DEFAULT_STALL_PENALTY,
    PlanContext,
    PlanState,
    TransferTime,
    advance,
    start_state,
)
from sakura.edge_client.policy import HybridPolicy, LevelPolicy, register_policy
from sakura.emulation.traces import BandwidthTrace

#: Plans whose fetch and compute clocks agree to this many seconds are merged (best score kept).
_BUCKET_S = 1e-4
_MAX_STATES = 4096


class OraclePolicy:
    """``trace_time(t)`` maps a time of the edit (seconds since it began) to the trace's clock."""

    name = "oracle"

    def __init__(
        self,
        trace: BandwidthTrace,
        trace_time: Callable[[float], float] = lambda t: t,
        stall_penalty: float = DEFAULT_STALL_PENALTY,
        horizon: int | None = None,
    ) -> None:
        """``horizon``: shards planned ahead (None: every remaining one; a per-step model's
        thousands of shards need a window)."""
        self.trace, self.trace_time, self.stall_penalty, self.horizon = trace, trace_time, stall_penalty, horizon

    def transfer(self, ctx: PlanContext | None = None) -> TransferTime:
        """The true transfer time of the link (what a hybrid oracle splits with)."""
        return lambda start, nbytes: self.trace.transfer_time(self.trace_time(start), nbytes)

    def plan(self, ctx: PlanContext) -> list[str]:
        """The best levels for shards ``ctx.index`` onwards."""
        transfer = self.transfer()
        frontier: dict[tuple[int, int], tuple[PlanState, list[str]]] = {(0, 0): (start_state(ctx, transfer), [])}
        last = len(ctx.shards) if self.horizon is None else min(len(ctx.shards), ctx.index + self.horizon)
        for index in range(ctx.index, last):
            grown: dict[tuple[int, int], tuple[PlanState, list[str]]] = {}
            for state, levels in frontier.values():
                for level in ctx.levels:
                    nxt = advance(state, ctx, index, level, transfer)
                    key = (round(nxt.fetch_free / _BUCKET_S), round(nxt.ready / _BUCKET_S))
                    held = grown.get(key)
                    if held is None or nxt.score(self.stall_penalty) > held[0].score(self.stall_penalty):
                        grown[key] = (nxt, levels + [level])
            frontier = _prune(grown, self.stall_penalty)
        return max(frontier.values(), key=lambda sl: sl[0].score(self.stall_penalty))[1]

    def choose(self, ctx: PlanContext) -> str:
        return self.plan(ctx)[0]

    def abandon(self, ctx: PlanContext, level: str, received: int, rate: float) -> str | None:
        return None  # it knew the future when it chose


def _prune(states: dict, penalty: float) -> dict:
    """Drop plans another plan beats on every count (earlier fetch, earlier compute, better score)."""
    ranked = sorted(states.items(), key=lambda kv: -kv[1][0].score(penalty))
    kept: list[tuple[tuple[int, int], tuple[PlanState, list[str]]]] = []
    for key, (state, levels) in ranked:
        if not any(s.fetch_free <= state.fetch_free and s.ready <= state.ready for _, (s, _) in kept):
            kept.append((key, (state, levels)))
            if len(kept) >= _MAX_STATES:
                break
    return dict(kept)


def oracle_policy(**kwargs: object) -> LevelPolicy:
    """The hybrid with the true bandwidth: it splits and picks levels knowing the future."""
    if "trace" not in kwargs:
        raise PolicyError("the oracle policy needs the true bandwidth: pass trace=")
    hybrid = HybridPolicy(OraclePolicy(**kwargs))  # type: ignore[arg-type]
    hybrid.name = "oracle"
    return hybrid


register_policy("oracle", oracle_policy)
