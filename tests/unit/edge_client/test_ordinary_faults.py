"""Ordinary conditions that used to break the edge client (issue 12, items 18, 19, 21, 25, 28):
servers closing idle keep-alive connections, one stage failing while others wait, cancels,
a policy naming a level the template lacks, and closing the session mid-download."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import psutil
import pytest

from sakura.edge_client import EdgeSession, RetryPolicy
from sakura.edge_client._http import connections
from sakura.edge_client._http.connections import ConnectionPool
from sakura.edge_client._http.transport import HttpTransport
from sakura.edge_client.errors import EditCancelled, PolicyError, ServerError, TransportError
from sakura.edge_client.policy import FixedPolicy
from sakura.emulation import TraceLink
from sakura.emulation.traces import BandwidthTrace
from sakura.platform.images import load_image
from tests.edge_servers import HANG_S, ApiServer
from tests.unit.edge_client.test_session import PHOTO
from tests.virtual_clock import VirtualClock

MANIFEST = "/v1/templates/portrait/versions/1/manifest"


def flat_trace(mbps: float) -> BandwidthTrace:
    return BandwidthTrace("flat", "test", np.array([0.0]), np.array([mbps]), 60.0)


@pytest.fixture(scope="module")
def short_keep_alive(ref_library):
    """The real API on a server that closes keep-alive connections after 1 s idle."""
    with ApiServer(ref_library, keep_alive_s=1) as server:
        yield server


def test_a_pooled_connection_the_server_closed_costs_no_attempt(short_keep_alive):
    transport = HttpTransport(short_keep_alive.url, retry=RetryPolicy(attempts=1), idle_s=60)
    assert transport.get(MANIFEST).status == 200
    time.sleep(1.5)  # the server has closed the idle connection; the pool still holds it
    assert transport.get(MANIFEST).status == 200  # retried at once on a fresh connection
    transport.close()


@dataclass(frozen=True)
class CountedBackoff(RetryPolicy):
    """A retry policy that records every backoff the transport asks it for."""

    asked: list[int] = field(default_factory=list, compare=False)

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        self.asked.append(attempt)
        return super().delay(attempt, retry_after)


def test_the_next_edit_after_an_idle_spell_pays_no_retry_backoff(short_keep_alive, reference_model):
    backoff = CountedBackoff(attempts=3, backoff_s=30.0, max_backoff_s=30.0)
    with EdgeSession(short_keep_alive.url, retry=backoff, models=lambda _: reference_model) as session:
        session.edit(load_image(PHOTO), "portrait", policy="fixed-medium")
        time.sleep(1.5)  # the server closes the idle connections the pool still holds
        second = session.edit(load_image(PHOTO), "portrait", policy="fixed-medium")
    assert [s.attempts for s in second.timeline.shards] == [1] * 6
    assert backoff.asked == []  # each stale connection was replaced at once, never waited out


def test_idle_connections_expire(monkeypatch):
    """Kept 0.2 s idle: reused after 0.1 s, replaced after 0.3 s, on a virtual clock (the pool's
    ``time.monotonic``), since this machine may take longer than 0.2 s between two calls."""
    clock = VirtualClock()
    monkeypatch.setattr(connections, "time", SimpleNamespace(monotonic=clock.now, sleep=time.sleep))
    pool = ConnectionPool(timeout_s=1.0, idle_s=0.2)
    origin = ("http", "127.0.0.1", 9)
    conn, reused = pool.take(origin)
    pool.give_back(origin, conn)
    clock.wait(0.1)
    assert pool.take(origin) == (conn, True)
    pool.give_back(origin, conn)
    clock.wait(0.3)
    fresh, reused = pool.take(origin)
    assert fresh is not conn and not reused


def test_the_first_error_of_any_download_stops_every_stage_at_once(proxy, reference_model):
    """Shard 0 hangs (the client would wait for it for longer than the server holds it); shard
    1's 404 ends the edit while shard 0's request is still held: nothing waited for it."""
    hang = proxy.add(r"/shards/0/", "hang", times=100)
    proxy.add(r"/shards/1/", "status:404")
    with EdgeSession(proxy.url, timeout_s=10 * HANG_S, models=lambda _: reference_model) as session:
        for _ in range(3):  # a fast link already measured: the next request leaves before shard 0 ends
            session.estimator.observe(10_000_000, 0.1, at=session.estimator.clock())
        with pytest.raises(ServerError) as err:
            session.edit(load_image(PHOTO), "portrait", policy="fixed-full")
        assert hang.held == 1
    assert err.value.status == 404


@pytest.mark.parametrize("hang", [r"/preamble$", r"/shards/"])
def test_cancel_returns_from_a_server_that_never_answers_without_waiting_for_it(proxy, reference_model, hang):
    """The server holds the request far longer than the client's own timeout would let it wait;
    the edit returns on cancel while the request is still held. (How soon after the press it
    returns is a latency of this machine, not asserted here.)"""
    fault = proxy.add(hang, "hang", times=100)
    cancel = threading.Event()

    def press_cancel_once_held() -> None:
        while not fault.held and not cancel.is_set():
            time.sleep(0.01)
        cancel.set()

    threading.Thread(target=press_cancel_once_held, daemon=True).start()
    with EdgeSession(proxy.url, timeout_s=10 * HANG_S, models=lambda _: reference_model) as session:
        with pytest.raises(EditCancelled):
            session.edit(load_image(PHOTO), "portrait", policy="fixed-full", cancel=cancel)
        assert fault.held >= 1


class _RoguePolicy(FixedPolicy):
    """Fixed at ``full``, then asks to switch to a level no template has."""

    def __init__(self) -> None:
        super().__init__("full")
        self.name = "rogue"

    def abandon(self, ctx, level, received, rate):
        return "no-such-level"


def test_a_policy_naming_a_level_the_template_lacks_is_a_typed_error(api, reference_model):
    link = TraceLink(flat_trace(2.0), rtt_s=0.0)  # slow enough for the abandonment checks to run
    with EdgeSession(api.url, link=link, models=lambda _: reference_model) as session:
        with pytest.raises(PolicyError, match="no-such-level"):
            session.edit(load_image(PHOTO), "portrait", policy=_RoguePolicy())


def test_closing_the_transport_mid_download_stops_it_and_leaks_no_connection(api):
    link = TraceLink(flat_trace(1.0), rtt_s=0.0)  # a full shard takes about 2 s
    transport = HttpTransport(api.url, link=link)
    manifest = transport.get(MANIFEST).json()
    location = manifest["shards"][0]["levels"]["full"]
    outcome: list[BaseException | object] = []

    def download() -> None:
        try:
            outcome.append(transport.download("/v1/templates/portrait/versions/1/shards/0/full",
                                              sha256=location["sha256"], length=location["length"]))
        except BaseException as exc:  # noqa: BLE001 (recorded for the assertion)
            outcome.append(exc)

    thread = threading.Thread(target=download)
    thread.start()
    time.sleep(0.3)
    transport.close()
    thread.join(timeout=60)  # a hang guard: the download itself would take ~2 s more
    assert not thread.is_alive()
    assert isinstance(outcome[0], TransportError) and "closed" in str(outcome[0])  # stopped, not finished
    port = int(api.url.rsplit(":", 1)[1])
    open_to_server = [c for c in psutil.Process().net_connections("tcp")
                      if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED]
    assert open_to_server == []
