from __future__ import annotations

from pathlib import Path

import pytest

from sakura.edge_client.errors import ConfigError
from sakura.edge_client.estimator import BandwidthEstimator
from sakura.emulation.traces import load_trace

TRACES = Path(__file__).resolve().parents[4] / "shared" / "traces"


def test_no_estimate_until_observed_unless_guessed():
    assert BandwidthEstimator().estimate() is None
    assert BandwidthEstimator(initial_bytes_per_s=1e6).estimate().bytes_per_s == 1e6


def back_to_back(est: BandwidthEstimator, transfers: list[tuple[int, float]], t: float = 0.0) -> float:
    """Observe ``transfers`` (bytes, seconds) one after another from ``t``; returns when the last ended."""
    for nbytes, seconds in transfers:
        t += seconds
        est.observe(nbytes, seconds, at=t)
    return t


def test_steady_link_converges_with_no_error():
    est = BandwidthEstimator(clock=None)
    t = back_to_back(est, [(1_000_000, 0.5)] * 10)
    e = est.estimate(t)
    assert e.bytes_per_s == pytest.approx(2e6) and e.error == pytest.approx(0.0)


def test_a_slow_transfer_pulls_the_estimate_down_at_once_and_error_discounts_it():
    est = BandwidthEstimator(clock=None)
    t = back_to_back(est, [(1_000_000, 0.1)] * 5 + [(1_000_000, 1.0)])  # 10 MB/s, then 1 MB/s: a 9x surprise
    e = est.estimate(t)
    assert e.error == pytest.approx(9.0)
    assert e.bytes_per_s < 1e6  # below even the slow sample: the link just proved unpredictable


def test_transfers_count_by_their_bytes():
    """The recent rate is the last transfers' bytes over their seconds: a one-second sample of
    0.1 MB/s and a 4 s preamble of 8 MB at 2 MB/s read as about 1.6 MB/s, not as the 0.19 MB/s
    their two rates' plain harmonic mean says (klein 4B on a 5G walk planned its whole pass on the
    phone so). Transfers of one size (shards of a level) read as their plain harmonic mean."""
    est = BandwidthEstimator(clock=None)
    t = back_to_back(est, [(100_000, 1.0), (8_000_000, 4.0)])
    recent = 8_100_000 / 5.0
    assert est.estimate(t).point_bytes_per_s == pytest.approx(min(recent, 0.75 * 2e6 + 0.25 * 1e5))
    same = BandwidthEstimator(clock=None)
    t = back_to_back(same, [(1_000_000, 0.1), (1_000_000, 1.0)])
    assert same.estimate(t).point_bytes_per_s == pytest.approx(2 / (1 / 10e6 + 1 / 1e6))


def test_the_discount_fades_while_nothing_is_observed():
    """A phone that computes after a surprise fetches nothing: were the surprise remembered until
    the next download, the phone would never fetch again (SD3.5 on a 5G trace whose first seconds
    ran at 13 Mbit/s computed the whole edit where fetching took 0.6 of the time)."""
    est = BandwidthEstimator(half_life_s=2.0, clock=None)
    t = back_to_back(est, [(1_000_000, 0.1)] * 5 + [(1_000_000, 1.0)])
    assert est.estimate(t + 4.0).error == pytest.approx(9.0 / 4)  # two half-lives
    assert est.estimate(t + 20.0).error == pytest.approx(9.0 / 1024)
    assert est.estimate(t + 20.0).bytes_per_s > 0.99 * est.estimate(t + 20.0).point_bytes_per_s


def test_samples_after_silences_count_for_the_silences():
    """The EWMA weighs a sample by its transfer time, or by the silence before it when longer. A
    computing phone's few short probes, seconds apart, say more about the link now than the dip
    seconds ago; weighed by their transfer times alone they barely moved it."""
    def after(gap: float) -> float:
        est = BandwidthEstimator(half_life_s=2.0, clock=None)
        t = back_to_back(est, [(1_000_000, 0.1)] * 5 + [(10_000_000, 10.0)])  # 10 MB/s, then a 1 MB/s dip
        for _ in range(5):  # the link is back at 10 MB/s: five short probes, ``gap`` apart
            t += gap
            est.observe(1_000_000, 0.1, at=t)
        return est.estimate(t).point_bytes_per_s
    assert after(3.0) > 9e6 and after(0.1) < 4e6


def test_the_estimate_reads_its_clock_unless_told_the_time():
    now = [0.0]
    est = BandwidthEstimator(clock=lambda: now[0])
    est.observe(1_000_000, 0.1, at=0.1)
    est.observe(1_000_000, 1.0, at=1.1)
    fresh = est.estimate().error
    now[0] = 11.1
    assert est.estimate().error == pytest.approx(fresh / 32) and est.estimate(1.1).error == fresh
    with pytest.raises(ConfigError):
        BandwidthEstimator(clock=None).estimate()


def test_bad_samples_are_ignored():
    est = BandwidthEstimator()
    for nbytes, seconds, at in [(0, 1.0, 1.0), (100, 0.0, 1.0), (100, -1.0, 1.0), (100, float("inf"), 1.0),
                                (100, 1.0, float("nan"))]:
        est.observe(nbytes, seconds, at=at)
    assert est.estimate() is None


@pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/traces is not beside this checkout")
@pytest.mark.parametrize("name", ["norway-hsdpa/norway_bus_3", "lumos-4g/4g_trace_driving_50162_dr",
                                  "mahimahi-cellular/TMobile-LTE-driving.down"])
def test_on_real_traces_the_estimate_is_conservative(name):
    """Shard after shard over a real trace, the estimate undershoots the next shard's real rate
    most of the time (a deadline-aware policy would rather wait less than stall)."""
    trace = load_trace(TRACES / name)
    est = BandwidthEstimator(clock=None)
    t, shard, under, total = 0.0, 200_000, 0, 0
    for _ in range(150):
        seconds = trace.transfer_time(t, shard)
        e = est.estimate(t)
        if e is not None:
            total += 1
            under += e.bytes_per_s <= shard / seconds
        t += seconds
        est.observe(shard, seconds, at=t)
    assert total > 100 and under / total >= 0.8  # last-sample prediction: 0.47-0.70 on these traces


def test_a_copy_knows_what_the_original_knew_and_observes_on_its_own():
    est = BandwidthEstimator(clock=None)
    t = back_to_back(est, [(1_000_000, 0.5)] * 3 + [(1_000_000, 2.0)])
    est.observe_rtt(0.04)
    twin = est.copy()
    assert twin.estimate(t) == est.estimate(t) and twin.rtt_s == est.rtt_s
    twin.observe(1_000_000, 0.1, at=t + 0.1)
    twin.observe_rtt(0.2)
    assert twin.estimate(t + 0.1) != est.estimate(t + 0.1) and est.rtt_s == pytest.approx(0.04)
