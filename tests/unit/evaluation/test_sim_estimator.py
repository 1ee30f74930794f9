"""The simulated phone's estimator learns of a download when it ends, whatever order the
simulation computes downloads in (:mod:`sakura.evaluation.sim_estimator`)."""

from __future__ import annotations

import random

import pytest

from sakura.edge_client.estimator import BandwidthEstimator
from sakura.evaluation.sim_estimator import TimedEstimator


def test_a_download_that_ends_later_is_not_known_before_it_ends():
    known = BandwidthEstimator(clock=None)
    known.observe(1_000_000, 0.1, at=0.0)  # 10 MB/s
    est = TimedEstimator(known)
    est.observe(100_000, 1.0, at=5.0)  # 100 kB/s, computed now, ending at 5 s
    phone = known.copy()
    assert est.estimate(4.99) == phone.estimate(4.99)  # before it ends: what the phone knew
    phone.observe(100_000, 1.0, at=5.0)
    assert est.estimate(5.0) == phone.estimate(5.0) != known.estimate(5.0)  # from its end on


def test_estimates_are_those_of_an_estimator_told_in_the_order_the_downloads_end():
    rng = random.Random(7)
    observations = [(rng.uniform(0.0, 20.0), rng.randint(1_000, 5_000_000), rng.uniform(0.01, 2.0), rng.random() < 0.2)
                    for _ in range(300)]
    est = TimedEstimator(BandwidthEstimator(clock=None))
    for at, nbytes, seconds, rtt in observations:  # in the order computed, not the order they end
        if rtt:
            est.observe_rtt(seconds / 10, at=at)
        else:
            est.observe(nbytes, seconds, at=at)
    queries = sorted(rng.uniform(0.0, 21.0) for _ in range(60))
    for now in [*queries, *reversed(queries)]:  # asked forwards and backwards
        phone = BandwidthEstimator(clock=None)
        for at, nbytes, seconds, rtt in sorted(observations, key=lambda o: o[0]):
            if at > now:
                break
            if rtt:
                phone.observe_rtt(seconds / 10)
            else:
                phone.observe(nbytes, seconds, at=at)
        assert est.estimate(now) == phone.estimate(now)
        assert est.rtt_s(now) == pytest.approx(phone.rtt_s)


def test_an_observation_that_ends_before_those_already_known_is_told_in_its_place():
    est = TimedEstimator(BandwidthEstimator(clock=None))
    est.observe(1_000_000, 0.1, at=2.0)
    late = est.estimate(3.0)
    est.observe(50_000, 1.0, at=1.0)  # ends first, computed second
    phone = BandwidthEstimator(clock=None)
    phone.observe(50_000, 1.0, at=1.0)
    phone.observe(1_000_000, 0.1, at=2.0)
    assert est.estimate(3.0) == phone.estimate(3.0) != late
