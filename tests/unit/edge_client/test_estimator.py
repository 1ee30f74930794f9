from __future__ import annotations

from pathlib import Path

import pytest

from sakura.edge_client.estimator import BandwidthEstimator
from sakura.emulation.traces import load_trace

TRACES = Path(__file__).resolve().parents[4] / "shared" / "traces"


def test_no_estimate_until_observed_unless_guessed():
    assert BandwidthEstimator().estimate() is None
    assert BandwidthEstimator(initial_bytes_per_s=1e6).estimate().bytes_per_s == 1e6


def test_steady_link_converges_with_no_error():
    est = BandwidthEstimator()
    for _ in range(10):
        est.observe(1_000_000, 0.5)
    e = est.estimate()
    assert e.bytes_per_s == pytest.approx(2e6) and e.error == pytest.approx(0.0)


def test_a_slow_transfer_pulls_the_estimate_down_at_once_and_error_discounts_it():
    est = BandwidthEstimator()
    for _ in range(5):
        est.observe(1_000_000, 0.1)  # 10 MB/s
    est.observe(1_000_000, 1.0)  # 1 MB/s: a 9x surprise
    e = est.estimate()
    assert e.error == pytest.approx(9.0)
    assert e.bytes_per_s < 1e6  # below even the slow sample: the link just proved unpredictable


def test_bad_samples_are_ignored():
    est = BandwidthEstimator()
    for nbytes, seconds in [(0, 1.0), (100, 0.0), (100, -1.0), (100, float("inf"))]:
        est.observe(nbytes, seconds)
    assert est.estimate() is None


@pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/traces is not beside this checkout")
@pytest.mark.parametrize("name", ["norway-hsdpa/norway_bus_3", "lumos-4g/4g_trace_driving_50162_dr",
                                  "mahimahi-cellular/TMobile-LTE-driving.down"])
def test_on_real_traces_the_estimate_is_conservative(name):
    """Shard after shard over a real trace, the estimate undershoots the next shard's real rate
    most of the time (a deadline-aware policy would rather wait less than stall)."""
    trace = load_trace(TRACES / name)
    est = BandwidthEstimator()
    t, shard, under, total = 0.0, 200_000, 0, 0
    for _ in range(150):
        seconds = trace.transfer_time(t, shard)
        e = est.estimate()
        if e is not None:
            total += 1
            under += e.bytes_per_s <= shard / seconds
        est.observe(shard, seconds)
        t += seconds
    assert total > 100 and under / total >= 0.8  # last-sample prediction: 0.47-0.70 on these traces
