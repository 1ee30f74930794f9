"""The time rules of the transport: an operation and an edit must keep up the minimum useful rate.
Their time is a virtual clock (``clock``), so each assertion is the rule's, not how busy this
machine is while the test sleeps (issue 36, item 4)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from sakura.edge_client._http import deadlines
from sakura.edge_client._http.deadlines import STALLED, NetworkBudget, Operation
from tests.virtual_clock import VirtualClock


@pytest.fixture
def clock(monkeypatch) -> VirtualClock:
    """The deadlines' ``time.monotonic``: it moves only when the test waits, by what it waits."""
    virtual = VirtualClock(start=1000.0)
    monkeypatch.setattr(deadlines, "time", SimpleNamespace(monotonic=virtual.now))
    return virtual


def operation(timeout_s: float, min_rate: float, budget: NetworkBudget | None = None, cancel=None) -> Operation:
    op = Operation("/x", timeout_s=timeout_s, min_rate=min_rate, cancel=cancel, budget=budget, closed=lambda: False)
    op.begin_attempt()
    return op


def test_an_operation_may_fall_behind_the_rate_by_one_timeout_per_attempt(clock):
    op = operation(timeout_s=0.1, min_rate=1000.0)
    assert op.check() is None
    clock.wait(0.15)
    assert op.check() == STALLED  # nothing received after a timeout: stalled
    op.got(200)  # 0.2 s of credit at 1000 B/s
    assert op.check() is None
    op.begin_attempt()  # a retry earns another timeout of grace
    assert op.deadline() - op.start >= 0.2 + 0.2 - 1e-9


def test_downloads_in_flight_together_are_each_owed_their_share(clock):
    budget = NetworkBudget(grace_s=10.0, min_rate=1000.0)
    op = operation(timeout_s=0.1, min_rate=1000.0, budget=budget)
    op.got(1000)
    alone = op.deadline()
    with budget.busy(), budget.busy():
        assert op.deadline() - op.start > alone - op.start  # two share the link: half the rate each


def test_the_edit_budget_counts_only_time_with_downloads_in_flight(clock):
    budget = NetworkBudget(grace_s=0.1, min_rate=1000.0)
    clock.wait(0.15)  # the phone computing: not counted
    assert not budget.expired()
    with budget.busy():
        clock.wait(0.15)
        assert budget.expired()
        budget.add(1000)  # a second of credit
        assert not budget.expired()


def test_an_expired_edit_budget_or_a_cancel_is_final(clock):
    budget = NetworkBudget(grace_s=0.0, min_rate=1000.0)
    cancel = threading.Event()
    op = operation(timeout_s=10.0, min_rate=1000.0, budget=budget, cancel=cancel)
    with budget.busy():
        clock.wait(0.01)
        assert op.check() == "edit deadline"
        cancel.set()
        assert op.check() == "cancelled"
