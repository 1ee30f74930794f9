"""Sustained sessions: a phone that heats up slows down, its model's power falls with its speed,
and the radio's tail is shared between edits."""

from __future__ import annotations

import math

import pytest

from sakura.emulation.traces import BandwidthTrace
from sakura.evaluation.energy import PHONES, RADIOS
from sakura.evaluation.sustained import session_summary, sustained_session
from sakura.evaluation.thermal import NEVER_THROTTLES, ThermalModel


def test_the_thermal_model_holds_peak_speed_until_its_onset_then_settles_at_the_sustained_fraction():
    model = ThermalModel(sustained_fraction=0.6, onset_s=100.0, settle_s=50.0, cooling_s=200.0)
    assert model.speed(0.0) == model.speed(100.0) == 1.0
    assert model.speed(150.0) == pytest.approx(0.6 + 0.4 * math.exp(-1.0))
    assert model.speed(1e6) == pytest.approx(0.6)
    assert model.after(50.0, 10.0, 0.0) == 60.0
    assert model.after(50.0, 10.0, 200.0) == pytest.approx(60.0 * math.exp(-1.0))


def test_back_to_back_edits_throttle_the_phone_and_cost_the_same_compute_joules(measured):
    _, geometry, _ = measured
    # an edit computes for 20 s, longer than the 10 s between starts, whatever this machine measured
    # (scaled by a fixed factor, a fast moment's measurement left edits under 10 s, and no heat)
    heavy = geometry.scaled(20.0 / geometry.ondevice_compute_s("on-device"))
    link = BandwidthTrace.constant(20.0, duration=1e5)
    kw = dict(edits=14, every_s=10.0, rtt_s=0.05, radio=RADIOS["lte"], phone=PHONES["flagship"])
    hot = sustained_session(heavy, link, 0.0, "on-device", thermal=ThermalModel(), **kw)
    cool = sustained_session(heavy, link, 0.0, "on-device", thermal=NEVER_THROTTLES, **kw)

    speeds = [e.speed for e in hot]
    assert speeds[0] == 1.0 and speeds[-1] < 0.95 and speeds == sorted(speeds, reverse=True)
    assert hot[-1].latency_s > hot[0].latency_s * 1.05
    assert [e.speed for e in cool] == [1.0] * 14
    assert cool[-1].latency_s == pytest.approx(cool[0].latency_s, rel=1e-6)
    for before, after in zip(hot, hot[1:]):  # each edit starts when the previous one ends (or 10 s on)
        assert after.start_s == pytest.approx(max(before.start_s + 10.0, before.start_s + before.latency_s))
    # power proportional to speed: a throttled edit takes longer at less power, the same joules
    assert hot[-1].energy.compute_j == pytest.approx(cool[-1].energy.compute_j, rel=1e-6)

    summary = session_summary([hot, hot])
    assert len(summary["per_edit"]) == 14 and summary["first"]["speed_median"] == 1.0


def test_a_session_shares_the_radio_tail_so_its_middle_edits_pay_less_radio(measured):
    _, geometry, _ = measured
    link = BandwidthTrace.constant(20.0, duration=1e5)
    session = sustained_session(geometry, link, 0.0, "sakura-fetch-only", edits=3, every_s=5.0, rtt_s=0.05,
                                thermal=NEVER_THROTTLES, radio=RADIOS["lte"], phone=PHONES["flagship"])
    first, middle, last = (e.energy.radio_j for e in session)
    assert middle < first and middle < last  # the first pays the promotion, the last the whole tail
