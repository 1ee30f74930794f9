"""Energy accounting on hand-made timelines: every state and duration known, joules worked out by hand."""

from __future__ import annotations

import math

import pytest

from sakura.edge_client.timeline import ShardTiming, Stall, Timeline
from sakura.evaluation.energy import (
    FAMILY_RADIO,
    RADIOS,
    PhonePower,
    RadioModel,
    edit_energy,
    session_energy,
    transfers,
)

#: Round numbers, so each joule below can be checked with a pencil.
RADIO = RadioModel("hand", promotion_s=0.5, promotion_w=1.0, active_w=2.0, per_mbps_w=0.1,
                   tail=((2.0, 1.0), (3.0, 0.5)), source="hand-made")
PHONE = PhonePower("hand", compute_w=7.0, decode_w=3.0, base_w=0.5, sources="hand-made")
MB = 1_000_000


def hand_made(gap_s: float = 1.5) -> Timeline:
    """A 1 MB preamble over [0, 0.5]; shard 0 (4 MB) requested at 0.46, bytes over [0.5, 1.5],
    decoded over [1.5, 1.7]; shard 1 (2 MB) requested ``gap_s`` after that, in flight 1 s, decoded
    0.2 s; shard 2 computed by the phone (no request). The model runs from 0.5 to 6.0 + the gap's
    excess over 1.5 s, and stalls 0.7 s."""
    shift = gap_s - 1.5
    shards = [
        ShardTiming(0, level="medium", bytes=4 * MB, requested_at=0.46, first_byte_at=0.5, arrived_at=1.5,
                    decode_started_at=1.5, decoded_at=1.7),
        ShardTiming(1, level="compact", bytes=2 * MB, requested_at=3.0 + shift, first_byte_at=3.05 + shift,
                    arrived_at=4.0 + shift, decode_started_at=4.0 + shift, decoded_at=4.2 + shift),
        ShardTiming(2, level="compute", source="computed", needed_at=4.5 + shift, consumed_at=5.0 + shift),
    ]
    return Timeline("hand", shards, stalls=[Stall(1, 3.5 + shift, 4.2 + shift)], preamble_s=0.5,
                    preamble_bytes=1 * MB, compute_start=0.5, compute_end=6.0 + shift)


def test_every_state_of_a_hand_made_edit_costs_what_a_pencil_says():
    edit = hand_made()
    assert transfers(edit) == [(0.0, 1.5), (3.0, 4.0)]  # the preamble and shard 0 overlap: one span
    energy = edit_energy(edit, RADIO, PHONE)
    # radio: promotion 0.5 s x 1 W; active 2.5 s x 2 W; 56 Mbit x 0.1 J; the 1.5 s gap in the tail's
    # first state (1 W); the whole tail after the last transfer (2 s x 1 W + 3 s x 0.5 W)
    assert energy.radio_j == pytest.approx(0.5 + 5.0 + 5.6 + 1.5 + 3.5)
    assert energy.compute_j == pytest.approx((6.0 - 0.5 - 0.7) * 7.0)  # the stall is not compute
    assert energy.decode_j == pytest.approx((0.2 + 0.2) * 3.0)  # the computed shard is not decoded
    assert energy.base_j == pytest.approx(6.0 * 0.5)
    assert energy.total_j == pytest.approx(16.1 + 33.6 + 1.2 + 3.0)


def test_a_gap_longer_than_the_tail_demotes_the_radio_and_pays_a_promotion_again():
    short, long = (edit_energy(hand_made(gap), RADIO, PHONE) for gap in (4.9, 6.0))
    assert short.radio_j == pytest.approx(0.5 + 5.0 + 5.6 + (2.0 + 2.9 * 0.5) + 3.5)
    assert long.radio_j == pytest.approx(0.5 + 5.0 + 5.6 + (3.5 + 0.5) + 3.5)


def test_cachegens_fallback_computed_before_the_model_counts_as_compute():
    edit = Timeline("cachegen", [], compute_start=2.0, compute_end=3.0, precompute_s=0.75)
    energy = edit_energy(edit, RADIO, PHONE)
    assert energy.radio_j == 0.0 and energy.decode_j == 0.0
    assert energy.compute_j == pytest.approx(1.75 * 7.0)


def test_a_session_shares_the_radio_tail_between_edits():
    first, second, third = hand_made(), hand_made(), hand_made()
    # the second edit starts when the first ends (6.0 s), its preamble 3 s after the first edit's last
    # transfer (4.0 s): within its tail; the third starts long after the second's tail ran out
    starts = [0.0, 7.0, 100.0]
    alone = edit_energy(first, RADIO, PHONE)
    shared = session_energy(list(zip(starts, [first, second, third])), RADIO, PHONE)
    assert shared[0].radio_j == pytest.approx(alone.radio_j - 3.5 + (2.0 + 1.0 * 0.5))  # its tail cut after 3 s
    assert shared[1].radio_j == pytest.approx(alone.radio_j - 0.5)  # no promotion, the whole tail
    assert shared[2].radio_j == pytest.approx(alone.radio_j)
    assert [e.compute_j for e in shared] == pytest.approx([alone.compute_j] * 3)

    throttled = session_energy(list(zip(starts, [first, second, third])), RADIO, PHONE, compute_w=[7.0, 3.5, 7.0])
    assert throttled[1].compute_j == pytest.approx(alone.compute_j / 2)


def test_an_edit_without_the_network_pays_no_radio():
    edit = Timeline("on-device", [], compute_start=0.0, compute_end=2.0)
    assert transfers(edit) == []
    assert edit_energy(edit, RADIO, PHONE).radio_j == 0.0
    assert session_energy([(0.0, edit), (30.0, hand_made())], RADIO, PHONE)[1].radio_j == pytest.approx(
        edit_energy(hand_made(), RADIO, PHONE).radio_j)


def test_every_trace_family_has_a_sourced_radio():
    for family, radio in FAMILY_RADIO.items():
        model = RADIOS[radio]
        assert model.source and model.tail_s > 0, family
        assert model.tail_j(math.inf) == pytest.approx(sum(s * w for s, w in model.tail))
