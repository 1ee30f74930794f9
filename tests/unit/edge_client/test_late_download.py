"""The compute stage's extend rule (:mod:`sakura.edge_client.late_download`): when a fetched
shard would be decoded, judged from what its download has done so far."""

from __future__ import annotations

import pytest

from sakura.edge_client.late_download import fetch_due


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
