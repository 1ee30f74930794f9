"""The time rules of the transport: an operation and an edit must keep up the minimum useful rate."""

from __future__ import annotations

import threading
import time

from sakura.edge_client._http.deadlines import STALLED, NetworkBudget, Operation


def operation(timeout_s: float, min_rate: float, budget: NetworkBudget | None = None, cancel=None) -> Operation:
    op = Operation("/x", timeout_s=timeout_s, min_rate=min_rate, cancel=cancel, budget=budget, closed=lambda: False)
    op.begin_attempt()
    return op


def test_an_operation_may_fall_behind_the_rate_by_one_timeout_per_attempt():
    op = operation(timeout_s=0.1, min_rate=1000.0)
    assert op.check() is None
    time.sleep(0.15)
    assert op.check() == STALLED  # nothing received after a timeout: stalled
    op.got(200)  # 0.2 s of credit at 1000 B/s
    assert op.check() is None
    op.begin_attempt()  # a retry earns another timeout of grace
    assert op.deadline() - op.start >= 0.2 + 0.2 - 1e-9


def test_downloads_in_flight_together_are_each_owed_their_share():
    budget = NetworkBudget(grace_s=10.0, min_rate=1000.0)
    op = operation(timeout_s=0.1, min_rate=1000.0, budget=budget)
    op.got(1000)
    alone = op.deadline()
    with budget.busy(), budget.busy():
        assert op.deadline() - op.start > alone - op.start  # two share the link: half the rate each


def test_the_edit_budget_counts_only_time_with_downloads_in_flight():
    budget = NetworkBudget(grace_s=0.1, min_rate=1000.0)
    time.sleep(0.15)  # the phone computing: not counted
    assert not budget.expired()
    with budget.busy():
        time.sleep(0.15)
        assert budget.expired()
        budget.add(1000)  # a second of credit
        assert not budget.expired()


def test_an_expired_edit_budget_or_a_cancel_is_final():
    budget = NetworkBudget(grace_s=0.0, min_rate=1000.0)
    cancel = threading.Event()
    op = operation(timeout_s=10.0, min_rate=1000.0, budget=budget, cancel=cancel)
    with budget.busy():
        time.sleep(0.01)
        assert op.check() == "edit deadline"
        cancel.set()
        assert op.check() == "cancelled"
