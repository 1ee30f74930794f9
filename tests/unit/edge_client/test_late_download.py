"""The compute stage's extend rule (:mod:`sakura.edge_client.late_download`): when a fetched
shard would be decoded, judged from what its download has done so far."""

from __future__ import annotations

import pytest

from sakura.edge_client.late_download import (
    LATE_CHECK_S,
    TRUST,
    Due,
    Waiting,
    computes_instead,
    fetch_due,
    next_check,
    soonest_due,
)


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


def test_within_its_first_round_trip_a_download_has_no_rate_of_its_own_yet_nor_a_byte():
    """Its first byte comes a round trip after its request at the soonest: a shard requested just
    before the model asks for it is not due sooner than that (a fresh phone's request for the top
    of the pass, which a block cheaper than a round trip must not stall for)."""
    due = fetch_due(10.03, requested_at=10.0, rtt_s=0.05, planned_rate=1e6, received=0, left=1_000_000,
                    decode_s=0.0)
    assert due == pytest.approx(10.05 + 1.0)



def test_a_download_that_delivers_nothing_while_the_model_waits_is_expected_to_stall_as_long_again():
    # 96 kB of 5.6 MB left: its mean since the request (5.5 MB in 12 s) promises the rest in 0.2 s,
    # but nothing came in the 0.5 s the model has waited: another 0.5 s first, then the mean
    waiting = Waiting(since=12.0, received=5_500_000)
    mean = 5_500_000 / (12.5 - 0.05)
    due = fetch_due(12.5, requested_at=0.0, rtt_s=0.05, planned_rate=1e7, received=5_500_000, left=96_000,
                    decode_s=0.01, waiting=waiting)
    assert due == pytest.approx(12.5 + 0.5 + 96_000 / mean + 0.01)
    # so a phone that computes the block in 0.4 s gives up on it once it has waited about that long
    late = [t / 100 for t in range(1200, 1400) if fetch_due(
        t / 100, requested_at=0.0, rtt_s=0.05, planned_rate=1e7, received=5_500_000, left=96_000, decode_s=0.01,
        waiting=waiting) > t / 100 + 0.4]
    assert late and 12.0 + 0.4 - 0.25 <= late[0] <= 12.0 + 0.4


def test_within_a_round_trip_of_waiting_a_download_has_not_stalled_yet():
    waiting = Waiting(since=12.0, received=5_500_000)
    due = fetch_due(12.03, requested_at=0.0, rtt_s=0.05, planned_rate=1e7, received=5_500_000, left=96_000,
                    decode_s=0.01, waiting=waiting)
    assert due == pytest.approx(12.03 + 96_000 / (5_500_000 / 11.98) + 0.01)


def test_bytes_that_come_while_the_model_waits_leave_it_to_the_mean_rate():
    """A rate over a few checks is too noisy to give up a download for: any progress, and the mean judges."""
    waiting = Waiting(since=12.0, received=1_000_000)
    due = fetch_due(12.5, requested_at=10.0, rtt_s=0.05, planned_rate=1e7, received=1_000_001, left=400_000,
                    decode_s=0.0, waiting=waiting)
    assert due == pytest.approx(12.5 + 400_000 / (1_000_001 / 2.45))


def test_a_stall_is_timed_from_a_round_trip_after_a_request_made_while_the_model_waited():
    waiting = Waiting(since=12.0, received=0)
    # requested at 12.2: no byte could come before 12.25, so at 12.45 it has stalled for 0.2 s, not 0.45
    due = fetch_due(12.45, requested_at=12.2, rtt_s=0.05, planned_rate=1e6, received=0, left=1_000,
                    decode_s=0.0, waiting=waiting)
    assert due == pytest.approx(12.45 + 0.2 + 1_000 / 1e6)  # stalled as long again, then the planned rate


def test_a_download_with_no_byte_yet_has_no_rate_of_its_own_past_its_first_round_trip():
    """Its first byte a little later than the round trip (jitter, a request queued behind another)
    is not a rate of one byte a second: the planned rate judges it until the stall rule does."""
    waiting = Waiting(since=10.0, received=0)
    due = fetch_due(10.07, requested_at=10.0, rtt_s=0.05, planned_rate=1e6, received=0, left=1_000_000,
                    decode_s=0.0, waiting=waiting)
    assert due == pytest.approx(10.07 + 1.0)
    # so a phone that computes the block in 1.5 s gives it up only once it has waited about 0.5 s for a byte
    late = [t / 100 for t in range(1006, 1200) if fetch_due(
        t / 100, requested_at=10.0, rtt_s=0.05, planned_rate=1e6, received=0, left=1_000_000, decode_s=0.0,
        waiting=waiting) > t / 100 + 1.5]
    assert late and 10.05 + 0.5 - LATE_CHECK_S <= late[0] <= 10.05 + 0.5 + LATE_CHECK_S


def test_a_download_complete_but_for_its_decode_is_due_after_the_decode():
    waiting = Waiting(since=12.0, received=500_000)
    assert fetch_due(13.0, requested_at=10.0, rtt_s=0.05, planned_rate=1e6, received=500_000, left=0,
                     decode_s=0.2, waiting=waiting) == pytest.approx(13.2)


def test_judged_later_than_computing_the_phone_still_waits_half_the_compute_time_first():
    """A download judged in a dip may recover a moment later: the phone waits ``TRUST`` of the
    compute time before it gives up on it, then computes."""
    due = Due(expected=20.0, soonest=10.1, pass_end=20.0)  # far later than computing (1 s) would end
    assert not computes_instead(due, 10.0, waited=0.0, compute_s=1.0)
    assert not computes_instead(due, 10.49, waited=0.49, compute_s=1.0)
    assert computes_instead(due, 10.5, waited=TRUST * 1.0, compute_s=1.0)


def test_judged_sooner_than_computing_the_phone_waits_at_most_the_compute_time_over_the_trust():
    """A download that keeps promising its end (a crawl whose mean rate decays slowly) is given
    up once the model has waited the compute time over ``TRUST``: never worse than that bound."""
    assert not computes_instead(Due(10.1, 10.0, 10.1), 10.0, waited=1.9, compute_s=1.0)
    assert computes_instead(Due(10.1, 10.0, 10.1), 10.0, waited=1.0 / TRUST, compute_s=1.0)


def test_a_download_that_cannot_end_before_computing_would_is_computed_at_once():
    """Its round trip is no prediction: a block cheaper than what is left of it is computed without waiting."""
    soonest = soonest_due(10.0, requested_at=9.99, rtt_s=0.05, decode_s=0.001)
    assert soonest == pytest.approx(10.041)
    assert computes_instead(Due(soonest + 1.0, soonest, soonest + 1.0), 10.0, waited=0.0, compute_s=0.02)
    assert not computes_instead(Due(soonest + 1.0, soonest, soonest + 1.0), 10.0, waited=0.0, compute_s=0.05)


def test_the_rule_is_within_its_bounds_of_the_better_choice_made_knowing_the_future():
    """Ski rental with a prediction: over downloads that end at any time and judgements right or
    wrong, the model's wait plus what it then computes is within 1 + 1/TRUST of the better of
    waiting for the download and computing at once; judged right, within 1 + TRUST. Exactly, for a
    block dearer than a poll and for one cheaper (a flagship NPU's 16 ms): the model re-judges when
    a wait of the rule runs out (:func:`next_check`), not only every ``LATE_CHECK_S``."""
    for compute_s in (1.0, 0.016):
        for ends_after in [t / 10 * compute_s for t in range(0, 60)]:
            for judged_after in (2 * compute_s, 0.0):  # judged late (wrongly where it ends sooner), judged soon
                waited = 0.0
                while waited < ends_after:
                    due = Due(waited + judged_after, waited, waited + judged_after)
                    if computes_instead(due, waited, waited=waited, compute_s=compute_s):
                        break
                    waited = next_check(waited, asked=0.0, compute_s=compute_s)
                cost = ends_after if waited >= ends_after else waited + compute_s
                best = min(ends_after, compute_s)
                assert cost <= (1 + 1 / TRUST) * best + 1e-6
                if (judged_after > compute_s) == (ends_after > compute_s):  # judged right
                    assert cost <= (1 + TRUST) * best + 1e-6


def test_a_wait_of_the_rule_that_runs_out_before_the_next_poll_wakes_the_model_at_its_end():
    """Each of the rule's waits (``TRUST`` of the compute time, the compute time over it; ``TRUST``
    of a pass's first block to start it) wakes the model when it runs out; otherwise it polls."""
    asked = 10.0
    assert next_check(asked, asked=asked, compute_s=0.016) == pytest.approx(asked + TRUST * 0.016)
    assert next_check(asked + 0.01, asked=asked, compute_s=0.016) == pytest.approx(asked + 0.016 / TRUST)
    assert next_check(asked + 0.04, asked=asked, compute_s=0.016) == pytest.approx(asked + 0.04 + LATE_CHECK_S)
    assert next_check(asked, asked=asked, compute_s=1.0) == pytest.approx(asked + LATE_CHECK_S)
    assert next_check(asked, asked=asked, compute_s=1.0, block_s=0.02) == pytest.approx(asked + TRUST * 0.02)
    due = Due(expected=20.0, soonest=10.01, pass_end=20.0)  # judged far later than computing
    wake = next_check(asked, asked=asked, compute_s=0.016)
    assert computes_instead(due, wake, waited=wake - asked, compute_s=0.016)
