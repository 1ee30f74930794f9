"""Compute-or-fetch planning on the shared timing model (pure: no clock, no network)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from sakura.edge_client import PlanContext, make_policy
from sakura.edge_client.estimator import Estimate
from sakura.edge_client.planning import (
    COMPUTE,
    PlanState,
    ShardOption,
    _computed,
    best_split,
    constant_rate,
    encode_on_phone,
    fetched_top_down,
    level_utility,
    plan_context,
    request_lag,
    simulate,
    start_state,
    take_back,
)

LEVELS = ("compact", "medium", "full")
SIZES = {"compact": 20_000, "medium": 40_000, "full": 240_000}
N = 6
TEMPLATE_S = 0.03  # the phone computes one block of the template in 30 ms
LAYER_S = 0.01  # the request tokens through one block


def ctx(rate: float, *, n: int = N, pass_shards: int = 0, index: int = 0, can_compute: bool = True) -> PlanContext:
    shards = tuple(ShardOption(dict(SIZES)) for _ in range(n))
    return PlanContext(now=0.0, index=index, levels=LEVELS, shards=shards, utility=level_utility(SIZES),
                       estimate=Estimate(rate, 0.0), rtt_s=0.01, compute=(LAYER_S,) * n,
                       decode_s={lv: 0.001 for lv in LEVELS}, ready_at=0.0, template_compute=(TEMPLATE_S,) * n,
                       pass_shards=pass_shards, can_compute=can_compute)


def finish(c: PlanContext, plan: list[str], rate: float) -> float:
    return simulate(c, plan, constant_rate(rate)).ready


def test_a_computed_shard_costs_its_template_compute_and_no_link_time():
    c = ctx(1e3)
    state = simulate(c, [COMPUTE] * N, constant_rate(1e3))
    assert state.ready == pytest.approx(N * (TEMPLATE_S + LAYER_S))
    assert state.stall == 0.0 and state.computing == pytest.approx(N * TEMPLATE_S)
    assert state.fetch_free == 0.0  # the link never carried a byte


@pytest.mark.parametrize("rate, expected", [(1e3, N), (1e9, 0)])
def test_a_dead_link_computes_everything_and_a_fast_one_fetches_everything(rate, expected):
    assert best_split(ctx(rate), constant_rate(rate)) == expected
    choice = make_policy("hybrid").choose(ctx(rate))
    assert (choice == COMPUTE) == (expected > 0)


def test_in_between_the_split_beats_both_pure_plans():
    """At 1 MB/s a compact shard takes 20 ms to arrive and 30 ms to compute: fetching all of them
    stalls behind the link, computing all of them costs 180 ms; a split does better than either."""
    rate = 1e6
    c = ctx(rate)
    split = best_split(c, constant_rate(rate))
    assert 0 < split < N
    hybrid = [COMPUTE] * split + ["compact"] * (N - split)
    assert finish(c, hybrid, rate) < finish(c, [COMPUTE] * N, rate)
    assert finish(c, hybrid, rate) < min(finish(c, [lv] * N, rate) for lv in LEVELS)


def test_the_shard_hashes_a_fetch_waits_for_cost_it_a_round_trip_and_their_bytes_once():
    """A phone whose manifest came without the shards' sha256s fetches them before its first shard:
    the planner charges that to the first fetch only, so a split that fetches starts later, and a
    link fast enough to fetch everything without them may no longer be worth a round trip more."""
    rate, hashes = 1e6, N * len(LEVELS) * 32
    plain, pending = ctx(rate), replace(ctx(rate), hashes_bytes=hashes)
    fetched = simulate(plain, ["compact"] * N, constant_rate(rate))
    waited = simulate(pending, ["compact"] * N, constant_rate(rate))
    first_wait = plain.rtt_s + hashes / rate  # the hashes' request, then their bytes, before the shard's request
    assert waited.fetch_free == pytest.approx(fetched.fetch_free + first_wait)
    assert simulate(pending, [COMPUTE] * N, constant_rate(rate)).ready == pytest.approx(N * (TEMPLATE_S + LAYER_S))
    fast = 1e9  # shards arrive in no time: the round trips are the cost, and the phone hides them
    cheap = replace(ctx(fast), template_compute=(plain.rtt_s / 2,) * N)
    splits = [best_split(replace(cheap, hashes_bytes=b), constant_rate(fast)) for b in (0, hashes)]
    assert 0 < splits[0] < splits[1] < N  # one more round trip to hide: more blocks computed meanwhile


def test_the_split_is_the_best_of_every_prefix():
    rate = 1e6
    c = ctx(rate)
    split = best_split(c, constant_rate(rate))
    for other in range(N + 1):
        plans = [[COMPUTE] * other + [lv] * (N - other) for lv in LEVELS]
        best = min(finish(c, p, rate) for p in plans)
        assert finish(c, [COMPUTE] * split + ["compact"] * (N - split), rate) <= best + 1e-9


def test_no_source_or_a_fetched_block_below_means_fetch_only():
    assert best_split(ctx(1e3, can_compute=False), constant_rate(1e3)) == 0
    assert best_split(replace(ctx(1e3), template_compute=()), constant_rate(1e3)) == 0
    assert make_policy("hybrid").choose(ctx(1e3, can_compute=False)) == "compact"


def test_per_step_models_split_within_the_pass():
    c = ctx(1e3, n=2 * N, pass_shards=N)
    assert c.pass_end() == N and c.pass_end(N + 1) == 2 * N
    assert best_split(c, constant_rate(1e3)) == N
    assert best_split(replace(c, index=N + 2), constant_rate(1e3)) == N - 2


def test_bounded_stage_queues_keep_the_link_within_their_lag_of_the_model():
    """Behind queues ``window`` deep (a per-step model's) the request for shard ``j`` waits for the
    model to take ``j - request_lag(window)``: an instant link delivers every shard at once when the
    queues are unbounded, and the last only once the model took the shard that far below it."""
    n, window = 4 * N, 1
    lag = request_lag(window)
    bounded = replace(ctx(1e12, n=n, pass_shards=n), window=window)
    assert bounded.lag == lag == 4
    instant = constant_rate(1e12)
    free = simulate(replace(bounded, window=0), ["compact"] * n, instant)
    held = simulate(bounded, ["compact"] * n, instant)
    assert free.fetch_free < 2 * bounded.rtt_s
    assert held.fetch_free >= (n - 1 - lag) * LAYER_S  # the model takes shard k about k layers in
    assert held.stall == pytest.approx(free.stall)  # held back, never later: the model is the bottleneck
    assert replace(bounded, window=n).lag == 0  # queues as deep as the edit never bind


@pytest.mark.parametrize("window, rate", [(1, 3e5), (1, 5e5), (1, 7e5), (2, 5e5), (2, 7e5), (2, 1e6)])
def test_behind_bounded_queues_the_split_made_at_the_pass_start_holds_at_each_block(window, rate):
    """Re-planned at every block of the prefix it leaves to the phone, the split is the same one:
    the blocks already left are taken when the plan said (their template compute counted), so the
    phone never computes one more block at a time while the link waits."""
    n = 3 * N
    context = dict(levels=LEVELS, shards=tuple(ShardOption(dict(SIZES)) for _ in range(n)),
                   utility=level_utility(SIZES), estimate=Estimate(rate, 0.0), rtt_s=0.01,
                   compute=(LAYER_S,) * n, startup=0.0, decode_s={lv: 0.001 for lv in LEVELS}, compute_start=0.0,
                   last_consumed=None, template_compute=(TEMPLATE_S,) * n, pass_shards=n, window=window,
                   can_compute=True)
    split = best_split(plan_context(0.0, 0, **context), constant_rate(rate))
    assert 0 < split < n
    for index in range(1, split + 1):
        at = plan_context(0.0, index, computed=range(index), **context)
        assert best_split(at, constant_rate(rate)) == split - index, index


def _exhaustive_split(c: PlanContext, rate: float) -> int:
    """Every split with the rest at every level, simulated in full: what best_split's pruning must match."""
    end, scores = c.pass_end(), {}
    for split in range(end - c.index + 1):
        plans = [[COMPUTE] * split + [lv] * (end - c.index - split) for lv in LEVELS]
        scores[split] = max(simulate(c, p, constant_rate(rate)).score(1000.0) for p in plans)
    top = max(scores.values())
    return min(s for s, v in scores.items() if v >= top - 1e-9)


@pytest.mark.parametrize("seed", range(40))
def test_the_pruned_search_finds_the_exhaustive_split(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 12)
    shards = tuple(ShardOption({lv: rng.randint(1, 8) * size for lv, size in SIZES.items()}, rng.uniform(0.2, 2.0))
                   for _ in range(n))
    rate = 10 ** rng.uniform(3, 8)
    c = replace(ctx(rate, n=n), shards=shards, index=rng.randrange(n), ready_at=rng.uniform(0, 0.1),
                template_compute=tuple(rng.uniform(0.001, 0.05) for _ in range(n)),
                compute=tuple(rng.uniform(0.0, 0.03) for _ in range(n)))
    assert best_split(c, constant_rate(rate)) == _exhaustive_split(c, rate)


def _taken_back(c: PlanContext, top: int, k: int, level: str, rate: float) -> PlanState:
    """One plan take_back weighs, shard by shard: the top ``k`` fetched top down at ``level``, the
    rest computed, and the model taking them in order."""
    state, decoded = start_state(c, constant_rate(rate)), fetched_top_down(c, top, k, level, constant_rate(rate))
    for index in range(c.index, top + 1):
        if index not in decoded:
            state = _computed(state, c, index)
            continue
        consumed = max(decoded[index], state.ready)
        state = replace(state, ready=consumed + c.compute[index], stall=state.stall + consumed - state.ready,
                        quality=state.quality + c.shards[index].weight * c.utility[level])
    return state


def _exhaustive_take_back(c: PlanContext, top: int, rate: float, penalty: float) -> str | None:
    """Every plan take_back weighs, each simulated in full: what its one pass must match."""
    best, level = _taken_back(c, top, 0, LEVELS[0], rate).score(penalty), None
    for k in range(1, top - c.index + 2):
        for lv in LEVELS:
            score = _taken_back(c, top, k, lv, rate).score(penalty)
            if score > best + 1e-9:
                best, level = score, lv
    return level


@pytest.mark.parametrize("seed", range(200))
def test_take_back_in_one_pass_finds_what_simulating_every_plan_finds(seed):
    """take_back scores every plan in one pass over the prefix (a per-step loop asks after every
    block the model takes): over random prefixes, links, queues and penalties it picks what
    simulating each plan shard by shard picks."""
    rng = random.Random(seed)
    n = rng.randint(1, 12)
    shards = tuple(ShardOption({lv: rng.randint(1, 8) * size for lv, size in SIZES.items()}, rng.uniform(0.2, 2.0))
                   for _ in range(n))
    rate = 10 ** rng.uniform(5, 8)
    index = rng.randrange(n)
    c = replace(ctx(rate, n=n), shards=shards, index=index, ready_at=rng.uniform(0, 0.1),
                template_compute=tuple(rng.uniform(0.001, 0.05) for _ in range(n)),
                compute=tuple(rng.uniform(0.0, 0.03) for _ in range(n)),
                in_flight=rng.choice([(), ((0.0, 3_000),), ((0.02, 40_000), (0.05, 3_000))]),
                decode_free_at=rng.uniform(0, 0.1), hashes_bytes=rng.choice([0, 5_000]))
    top, penalty = rng.randrange(index, n), rng.choice([1.0, 4.0, 1000.0])
    assert take_back(c, top, constant_rate(rate), penalty) == _exhaustive_take_back(c, top, rate, penalty)


def test_taking_back_blocks_left_to_the_phone_follows_the_link():
    """Shards 0..N-1 are left to the phone and not reached yet: a fast link takes the top one back
    (at the finest level that still arrives in time), a dead one leaves them all to the phone."""
    hybrid = make_policy("hybrid")
    assert hybrid.take_back(ctx(1e3), N - 1) is None
    assert take_back(ctx(1e9), N - 1, constant_rate(1e9)) == "full"
    assert hybrid.take_back(ctx(1e9), N - 1) == "full"


def test_a_block_the_phone_is_about_to_compute_is_taken_back_only_if_it_arrives_sooner():
    """One block left, needed now: computing it costs 30 ms, so a download of 20 ms plus a 10 ms
    round trip ties (computing wins: no bytes), and one a little faster wins."""
    last = N - 1
    at = replace(ctx(1e6), index=last)
    assert take_back(at, last, constant_rate(SIZES["compact"] / 0.025)) is None
    assert take_back(at, last, constant_rate(SIZES["compact"] / 0.015)) == "compact"



def test_a_phone_with_a_text_encoder_encodes_unless_fetching_is_known_to_be_sooner():
    link = Estimate(bytes_per_s=1e6, error=0.0)
    assert encode_on_phone(100_000, None, link, 0.05)  # never encoded here: as the phone alone would
    assert encode_on_phone(100_000, 0.5, None, 0.05)  # the link unknown: likewise
    assert encode_on_phone(10_000_000, 0.5, link, 0.05)  # a 10 s download
    assert not encode_on_phone(100_000, 0.5, link, 0.05)  # a 0.15 s one


def test_shards_requested_above_the_one_planned_cost_no_more_link_time():
    """The top of the pass, requested while a fresh phone timed its first block, is on its way: a
    plan from shard 1 counts no more bytes for it (a shard below is not ahead)."""
    n, rate = N, 2e6
    context = dict(levels=LEVELS, shards=tuple(ShardOption(dict(SIZES)) for _ in range(n)),
                   utility=level_utility(SIZES), estimate=Estimate(rate, 0.0), rtt_s=0.01,
                   compute=(LAYER_S,) * n, startup=0.0, decode_s={lv: 0.001 for lv in LEVELS}, compute_start=0.0,
                   last_consumed=None, template_compute=(TEMPLATE_S,) * n, pass_shards=n, can_compute=True)
    plain = plan_context(0.0, 1, computed=[0], ahead=[0], **context)
    ahead = plan_context(0.0, 1, computed=[0], ahead=[n - 1, n - 2], **context)
    assert [ahead.size("full", j) for j in range(n)] == [SIZES["full"]] * (n - 2) + [0, 0]
    assert [plain.size("full", j) for j in range(n)] == [SIZES["full"]] * n  # a shard below is not ahead
    fetched = lambda c, lv: simulate(c, [lv] * (n - 1), constant_rate(rate)).ready  # noqa: E731
    assert fetched(ahead, "full") < fetched(plain, "full")  # a link-bound plan ends sooner


def test_while_the_link_could_take_back_a_block_left_to_the_phone_it_fetches_the_fewest_bytes():
    """Above a prefix left to the phone that the model has not reached, a shard is due only once the
    phone has computed the prefix, which left robust MPC time to fetch it at a larger level; but
    every byte spent on it is link time the take-back could have used to spare the phone a block
    (klein 9B on a 5G drive fetched two shards at ``full``, 13 s of link, while the phone computed
    eleven blocks it could have fetched). So the hybrid fetches it at the level with the fewest bytes
    (a cached one if any, within the floor), and leaves quality to MPC once nothing is left to take
    back."""
    n, rate = N, 2e6
    context = dict(levels=LEVELS, shards=tuple(ShardOption(dict(SIZES)) for _ in range(n)),
                   utility=level_utility(SIZES), estimate=Estimate(rate, 0.0), rtt_s=0.01,
                   compute=(LAYER_S,) * n, startup=0.0, decode_s={lv: 0.001 for lv in LEVELS}, compute_start=0.0,
                   template_compute=(TEMPLATE_S,) * n, pass_shards=n)
    above_prefix = plan_context(0.0, 3, computed=[0, 1, 2], last_consumed=None, **context)
    reached = plan_context(0.0, 3, computed=[0, 1, 2], last_consumed=(2, 0.0), **context)
    assert (above_prefix.phone_before, reached.phone_before) == (3, 0)
    hybrid, mpc = make_policy("hybrid"), make_policy("mpc")
    assert mpc.choose(above_prefix) != "compact"  # time enough for more: what the inner policy picks
    assert hybrid.choose(above_prefix) == "compact"
    assert hybrid.choose(reached) == mpc.choose(reached)  # nothing left to take back: quality is MPC's
    cached = replace(above_prefix, shards=tuple(ShardOption({**SIZES, "medium": 0}) for _ in range(n)))
    assert hybrid.choose(cached) == "medium"
    floored = make_policy("hybrid", min_level="medium")
    assert floored.choose(above_prefix) == "medium"
