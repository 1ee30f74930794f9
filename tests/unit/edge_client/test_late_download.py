"""The compute stage's extend rule (:mod:`sakura.edge_client.late_download`): when a fetched
shard would be decoded, judged from what its download has done so far."""

from __future__ import annotations

import math

import pytest

from sakura.edge_client.late_download import Waiting, fetch_due


def test_a_download_not_yet_requested_costs_a_round_trip_then_its_bytes_at_the_planned_rate():
    assert fetch_due(10.0, requested_at=None, rtt_s=0.05, planned_rate=1e6, received=0, left=2_000_000,
                     decode_s=0.1) == pytest.approx(10.0 + 0.05 + 2.0 + 0.1)


def test_a_download_slower_than_planned_is_judged_at_the_rate_it_arrives_at():
    # 1 MB in the 2 s since its first byte could come: 0.5 MB/s, slower than the 1 MB/s planned
    due = fetch_due(12.05, requested_at=10.0, rtt_s=0.05, planned_rate=1e6, received=1_000_000, left=1_000_000,
                    decode_s=0.0)
    assert due == pytest.approx(12.05 + 2.0)


def test_a_download_faster_than_planned_is_still_judged_at_the_planned_rate():
    due = fetch_due(10.55, requested_at=10.0, rtt_s=0.05, planned_rate=1e6, received=4_000_000, left=1_000_000,
                    decode_s=0.0)
    assert due == pytest.approx(10.55 + 1.0)


def test_within_its_first_round_trip_a_download_has_no_rate_of_its_own_yet():
    due = fetch_due(10.03, requested_at=10.0, rtt_s=0.05, planned_rate=1e6, received=0, left=1_000_000,
                    decode_s=0.0)
    assert due == pytest.approx(10.03 + 1.0)


def test_a_download_that_delivers_nothing_for_a_round_trip_while_the_model_waits_is_never_due():
    # 96 kB of 5.6 MB left: its mean since the request (5.5 MB in 2 s) promises the rest in 35 ms,
    # but nothing came in the 60 ms the model has waited
    waiting = Waiting(since=12.0, received=5_500_000)
    due = fetch_due(12.06, requested_at=0.0, rtt_s=0.05, planned_rate=1e7, received=5_500_000, left=96_000,
                    decode_s=0.01, waiting=waiting)
    assert due == math.inf
    # the same a check into the wait: too soon to tell, its mean still stands
    early = fetch_due(12.03, requested_at=0.0, rtt_s=0.05, planned_rate=1e7, received=5_500_000, left=96_000,
                      decode_s=0.01, waiting=waiting)
    assert early == pytest.approx(12.03 + 96_000 / (5_500_000 / 11.98) + 0.01)


def test_the_rate_while_the_model_waits_counts_only_the_bytes_that_came_meanwhile():
    waiting = Waiting(since=12.0, received=1_000_000)
    due = fetch_due(12.5, requested_at=10.0, rtt_s=0.05, planned_rate=1e7, received=1_100_000, left=400_000,
                    decode_s=0.0, waiting=waiting)
    assert due == pytest.approx(12.5 + 400_000 / (100_000 / 0.5))


def test_the_wait_is_timed_from_a_round_trip_after_a_request_made_while_the_model_waited():
    waiting = Waiting(since=12.0, received=0)
    # requested at 12.2: no byte can come before 12.25, so at 12.28 the wait has no rate of its own yet
    due = fetch_due(12.28, requested_at=12.2, rtt_s=0.05, planned_rate=1e6, received=30_000, left=1_000_000,
                    decode_s=0.0, waiting=waiting)
    assert due == pytest.approx(12.28 + 1_000_000 / (30_000 / 0.03))


def test_a_download_restarted_at_another_level_keeps_its_mean_rate():
    # fewer bytes than when the wait began: a new download at a smaller level, not a stall
    waiting = Waiting(since=12.0, received=900_000)
    due = fetch_due(12.5, requested_at=10.0, rtt_s=0.05, planned_rate=1e6, received=200_000, left=100_000,
                    decode_s=0.0, waiting=waiting)
    assert due == pytest.approx(12.5 + 100_000 / (200_000 / 2.45))


def test_a_download_complete_but_for_its_decode_is_due_after_the_decode():
    waiting = Waiting(since=12.0, received=500_000)
    assert fetch_due(13.0, requested_at=10.0, rtt_s=0.05, planned_rate=1e6, received=500_000, left=0,
                     decode_s=0.2, waiting=waiting) == pytest.approx(13.2)
