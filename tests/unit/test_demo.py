"""The demo's live verdict: SAKURA against the phone alone, compared pair by pair."""

from __future__ import annotations

import pytest

from sakura import demo
from sakura.demo import _pair_order, paired_ratio


def test_a_slow_spell_during_one_pair_does_not_decide_the_verdict():
    # Both systems took the same time in every pair but the first, where a slow spell of the
    # machine hit SAKURA's edit: the separate medians say 0.43 / 0.39 = 1.10.
    sakura = [0.52, 0.39, 0.43, 0.44, 0.39]
    alone = [0.39, 0.39, 0.43, 0.44, 0.39]
    assert sorted(sakura)[2] / sorted(alone)[2] == pytest.approx(0.43 / 0.39)
    assert paired_ratio(list(zip(sakura, alone))) == pytest.approx(1.0)


def test_a_slower_system_is_reported_slower():
    assert paired_ratio([(0.6, 0.4), (0.62, 0.41), (0.59, 0.4)]) > 1.4


def test_no_pairs_is_an_error():
    with pytest.raises(ValueError):
        paired_ratio([])


def test_the_two_policies_take_turns_going_first():
    orders = [_pair_order(["hybrid", "on-device"], repeat) for repeat in range(4)]
    assert orders == [["hybrid", "on-device"], ["on-device", "hybrid"]] * 2


def test_repeats_below_one_are_refused():
    with pytest.raises(SystemExit):
        demo.main(["--repeats", "0"])
