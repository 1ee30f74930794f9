"""Level policies on the shared timing model (pure: no clock, no network)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from sakura.edge_client import PlanContext, make_policy, planning
from sakura.edge_client.errors import PolicyError
from sakura.edge_client.estimator import Estimate
from sakura.edge_client.planning import ShardOption, constant_rate, level_utility, simulate
from sakura.edge_client.policy import FixedPolicy, RobustMPCPolicy, ThroughputPolicy
from sakura.emulation.traces import BandwidthTrace, load_trace
from sakura.evaluation.oracle import OraclePolicy, oracle_policy

LEVELS = ("compact", "medium", "full")
SIZES = {"compact": 20_000, "medium": 40_000, "full": 240_000}


def ctx(
    rate: float | None,
    *,
    index: int = 0,
    n: int = 6,
    layer_s: float = 0.1,
    cached: dict[int, set[str]] | None = None,
    now: float = 0.0,
    ready_at: float | None = None,
    error: float = 0.0,
) -> PlanContext:
    cached = cached or {}
    shards = tuple(
        ShardOption({lv: 0 if lv in cached.get(i, set()) else size for lv, size in SIZES.items()}) for i in range(n)
    )
    return PlanContext(now=now, index=index, levels=LEVELS, shards=shards, utility=level_utility(SIZES),
                       estimate=None if rate is None else Estimate(rate, error), rtt_s=0.01,
                       compute=(layer_s,) * n, decode_s={lv: 0.001 for lv in LEVELS},
                       ready_at=now + 0.05 if ready_at is None else ready_at)


def test_utility_grows_with_size_with_diminishing_returns():
    u = level_utility(SIZES)
    assert u["compact"] == 1.0 < u["medium"] < u["full"]
    assert u["full"] - u["medium"] < (SIZES["full"] - SIZES["medium"]) / SIZES["compact"]


@pytest.mark.parametrize("rate, expected", [(50e6, "full"), (2e6, "medium"), (200e3, "compact"), (None, "compact")])
def test_mpc_picks_the_best_level_that_arrives_in_time(rate, expected):
    assert RobustMPCPolicy(horizon=1).choose(ctx(rate)) == expected


def test_mpc_looks_ahead_spending_slack_where_it_buys_the_most():
    """The first shard is due at once; taking it small leaves time to make later ones bigger."""
    c, transfer = ctx(2e6, layer_s=0.04), constant_rate(2e6)
    best = max(itertools.product(LEVELS, repeat=5), key=lambda plan: _score(c, plan, transfer))
    assert RobustMPCPolicy(horizon=1).choose(c) == "medium"
    assert RobustMPCPolicy(horizon=5).choose(c) == best[0] == "compact"
    assert simulate(c, best, transfer).stall == 0.0
    greedy = ["medium", *best[1:]]
    assert _score(c, best, transfer) > _score(c, greedy, transfer)


def test_mpc_never_plans_a_stall_it_can_avoid():
    c = ctx(2e6)
    plan = [RobustMPCPolicy().choose(c)]
    assert simulate(c, plan, constant_rate(2e6)).stall == 0.0
    assert simulate(c, ["full"], constant_rate(2e6)).stall > 0.0


def test_a_plan_counts_the_downloads_still_in_flight():
    """A new request's bytes follow what is still to come of the downloads in flight
    (``PlanContext.in_flight``, timed at the plan's rate): bytes its own round trip covers
    change nothing (20 kB at 2 MB/s: 10 ms), more delay it, and MPC picks a smaller level in time.
    A download whose first byte is not in yet delivers nothing before a round trip after it was
    asked for, so the same 20 kB asked for just now delay it."""
    idle, transfer = ctx(2e6), constant_rate(2e6)

    def arrival(*downloads: tuple[float, int, int]) -> float:
        in_flight = planning.in_flight(idle.now, idle.rtt_s, downloads)
        return simulate(replace(idle, in_flight=in_flight), ["medium"], transfer).fetch_free

    assert arrival() == arrival((-1.0, 5_000, 25_000)) == pytest.approx(0.01 + 0.02)  # a round trip, then 40 kB
    assert arrival((-1.0, 0, 100_000)) == pytest.approx(0.05 + 0.02)
    assert arrival((idle.now, 0, 20_000)) == pytest.approx(0.01 + 0.01 + 0.02)  # asked now: its round trip first
    assert arrival((idle.now, 0, 20_000), (idle.now, 0, 20_000)) == pytest.approx(0.01 + 0.02 + 0.02)
    assert RobustMPCPolicy().choose(idle) == "medium"
    assert RobustMPCPolicy().choose(replace(idle, in_flight=((0.0, 60_000),))) == "compact"


def test_in_flight_drops_downloads_already_in():
    assert planning.in_flight(1.0, 0.05, [(0.9, 300, 300), (0.95, 0, 100), (0.2, 50, 400)]) == (
        (1.0, 100), (1.0, 350))


def test_a_cached_level_is_free_so_it_is_taken():
    assert RobustMPCPolicy().choose(ctx(100e3, cached={0: {"full"}})) == "full"
    assert FixedPolicy("medium").choose(ctx(1e6, cached={0: {"full"}})) == "full"  # a better cached copy
    assert FixedPolicy("full").choose(ctx(1e6, cached={0: {"medium"}})) == "full"  # a worse one is not enough


def test_a_quality_floor_is_never_crossed_even_when_late():
    slow = ctx(100e3)
    assert RobustMPCPolicy().choose(slow) == "compact"
    assert RobustMPCPolicy(min_level="medium").choose(slow) == "medium"
    assert ThroughputPolicy(min_level="medium").choose(slow) == "medium"
    late = ctx(5e6, now=0.1, ready_at=0.15)
    assert RobustMPCPolicy(min_level="medium").abandon(late, "full", received=20_000, rate=300_000) == "medium"
    with pytest.raises(PolicyError):
        RobustMPCPolicy(min_level="ultra").choose(slow)


def test_throughput_rule():
    assert ThroughputPolicy().choose(ctx(50e6)) == "full"
    assert ThroughputPolicy().choose(ctx(2e6)) == "medium"
    assert ThroughputPolicy().choose(ctx(1e5)) == "compact"


def test_abandon_switches_only_when_the_download_will_clearly_be_late():
    policy = RobustMPCPolicy()
    late = ctx(5e6, now=0.1, ready_at=0.15)
    assert policy.abandon(late, "full", received=20_000, rate=300_000) == "compact"
    on_time = ctx(5e6, now=0.1, ready_at=1.0)
    assert policy.abandon(on_time, "full", received=20_000, rate=300_000) is None
    assert policy.abandon(late, "full", received=230_000, rate=300_000) is None  # nearly there: finish it
    assert policy.abandon(late, "compact", received=1000, rate=1000) is None
    assert FixedPolicy("full").abandon(late, "full", 20_000, 300_000) is None


def test_make_policy_by_name_and_typed_errors():
    assert make_policy("mpc").name == "mpc" and make_policy("fixed-medium").name == "fixed-medium"
    with pytest.raises(PolicyError):
        make_policy("nope")
    with pytest.raises(PolicyError, match="trace"):
        oracle_policy()
    with pytest.raises(PolicyError):
        FixedPolicy("ultra").choose(ctx(1e6))


TRACES = Path(__file__).resolve().parents[4] / "shared" / "traces"


def _score(c: PlanContext, plan, transfer) -> float:
    return simulate(c, plan, transfer).score(1000.0)


@pytest.mark.parametrize(
    "trace_file, offset",
    [
        ("norway-hsdpa/norway_bus_18", 30.0),
        ("lumos-4g/4g_trace_driving_50174_dr", 53.8),
    ],
)
def test_oracle_finds_the_best_plan_on_a_real_trace(trace_file, offset):
    path = TRACES / trace_file
    if not path.exists():
        pytest.skip("needs ../shared/traces")
    trace = load_trace(path)
    c = ctx(None, n=5, layer_s=0.05)
    oracle = OraclePolicy(trace, trace_time=lambda t: offset + t)
    transfer = oracle.transfer()
    best = max(_score(c, plan, transfer) for plan in itertools.product(LEVELS, repeat=5))
    assert _score(c, oracle.plan(c), transfer) == pytest.approx(best)


def test_oracle_beats_mpc_when_bandwidth_drops():
    drop = BandwidthTrace("drop", "test", np.array([0.0, 0.3]), np.array([40.0, 1.0]), 100.0)
    c = ctx(5e6, layer_s=0.1)
    oracle = OraclePolicy(drop)
    transfer = oracle.transfer()
    mpc_plan = []
    for i in range(6):  # MPC keeps believing the old estimate: it gets hurt by the drop
        mpc_plan.append(RobustMPCPolicy().choose(ctx(5e6, index=i, layer_s=0.1)))
    assert _score(c, oracle.plan(c), transfer) >= _score(c, mpc_plan, transfer)
    assert simulate(c, oracle.plan(c), transfer).stall <= simulate(c, mpc_plan, transfer).stall
