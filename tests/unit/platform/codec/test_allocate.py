"""Allocation of a level's error over units: greedy by marginal return on each unit's lower
convex hull, against brute force on small cases."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from sakura.platform.codec.allocate import Option, hull, marginal, uniform
from tests.hypothesis_seed import name_the_seed, per_run_seed


def ladder(points: list[tuple[int, float]]) -> list[Option]:
    return [Option(b, d, rung) for rung, (b, d) in enumerate(points)]


def test_the_hull_drops_dominated_and_concave_options():
    options = ladder([(10, 1.0), (12, 1.2), (20, 0.5), (30, 0.45), (31, 0.1), (40, 0.0)])
    assert hull(options) == [0, 2, 4, 5]


def test_marginal_moves_the_unit_with_the_best_return_first():
    cheap_gain = ladder([(10, 1.0), (11, 0.1)])  # 0.9 removed for 1 byte
    dear_gain = ladder([(10, 1.0), (110, 0.0)])  # 1.0 removed for 100 bytes
    assert marginal([cheap_gain, dear_gain], budget=1.2) == [1, 0]
    assert marginal([cheap_gain, dear_gain], budget=0.0) == [1, 1]  # every unit at its best when unmet


def test_uniform_takes_one_common_rung():
    a = ladder([(10, 1.0), (20, 0.3), (40, 0.0)])
    b = ladder([(10, 0.2), (20, 0.1), (40, 0.0)])
    assert uniform([a, b], budget=0.5) == [1, 1]
    assert uniform([a, b], budget=5.0) == [0, 0]


units = st.lists(st.lists(st.tuples(st.integers(1, 200), st.floats(0.0, 1.0)), min_size=1, max_size=5),
                 min_size=1, max_size=3)


@per_run_seed
@settings(max_examples=300, deadline=None)
@given(units, st.floats(0.0, 3.0))
def test_marginal_meets_any_reachable_budget_within_one_move_of_the_best(raw, budget):
    name_the_seed()
    options = [ladder(u) for u in raw]
    picks = marginal(options, budget)
    total = sum(options[u][i].distortion for u, i in enumerate(picks))
    best_each = sum(min(o.distortion for o in u) for u in options)
    assert total <= budget or abs(total - best_each) < 1e-9
    feasible = [sum(u[i].nbytes for u, i in zip(options, combo))
                for combo in itertools.product(*(range(len(u)) for u in options))
                if sum(u[i].distortion for u, i in zip(options, combo)) <= budget]
    if feasible and total <= budget:
        # The greedy's last move may overshoot the optimum by at most the largest single step's bytes.
        largest_step = max(o.nbytes for u in options for o in u)
        assert sum(options[u][i].nbytes for u, i in enumerate(picks)) <= min(feasible) + largest_step
