"""Shard requests ride behind the response streaming on their connection (HTTP/1.1 pipelining):
one connection, the second response right behind the first; a failure ahead or a cancel behind
loses no bytes and leaves no connection with an unread response in the pool."""

from __future__ import annotations

import hashlib
import threading
import time

import pytest

from sakura.edge_client._http.transport import HttpTransport
from sakura.edge_client.errors import EditCancelled
from sakura.emulation.traces import BandwidthTrace
from tests.held_link import HANG_GUARD_S, HeldLink
from tests.unit.edge_client.test_transport import shard

STREAM_S = 0.5  # how long the first shard's response streams once it goes on


def start(transport: HttpTransport, index: int, where: tuple, out: dict,
          cancel: threading.Event | None = None) -> threading.Thread:
    path, loc = where

    def run() -> None:
        try:
            out[index] = (transport.download(path, sha256=loc.sha256, length=loc.length, cancel=cancel, ride=True), loc)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            out[index] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def ride_behind(transport: HttpTransport, proxy, cancel: threading.Event | None = None) -> dict:
    """Shard 0 streaming, then shard 1 asked for while it does. Shard 0's response is held after
    its first chunk until shard 1's request has boarded its connection (with ``cancel``: until
    that request, cancelled once it boarded, gave up), so no race with this machine's speed
    decides whether it rode behind."""
    where = shard(transport, 0), shard(transport, 1)  # the manifest, before the shards' requests
    proxy.requests.clear()
    out: dict = {}
    link = transport.link
    assert isinstance(link, HeldLink)

    def boarded() -> bool:  # a request was sent behind the response streaming (the pool's lane)
        return any(lane._rider for lane in transport.pool._lanes.copy().values())

    link.hold(lambda: 1 in out if cancel is not None else boarded() or 1 in out)
    first = start(transport, 0, where[0], out)
    link.streaming.wait(HANG_GUARD_S)
    second = start(transport, 1, where[1], out, cancel)
    if cancel is not None:
        deadline = time.monotonic() + HANG_GUARD_S
        while not boarded() and time.monotonic() < deadline:
            time.sleep(0.005)
        cancel.set()
    first.join(HANG_GUARD_S)
    second.join(HANG_GUARD_S)
    return out


def slow_transport(proxy) -> HttpTransport:
    """A link on which shard 0 streams for STREAM_S, whatever size the codec makes it."""
    probe = HttpTransport(proxy.url)
    _, loc = shard(probe, 0)
    probe.close()
    link = HeldLink(BandwidthTrace.constant(loc.length * 8 / STREAM_S / 1e6), rtt_s=0.0)
    return HttpTransport(proxy.url, link=link)


def test_a_request_sent_while_a_response_streams_follows_it_on_the_same_connection(proxy):
    transport = slow_transport(proxy)
    out = ride_behind(transport, proxy)
    transport.close()
    (a, loc_a), (b, loc_b) = out[0], out[1]
    assert hashlib.sha256(a.data).hexdigest() == loc_a.sha256 and hashlib.sha256(b.data).hexdigest() == loc_b.sha256
    # sent while the first streamed, read after it began (an order of stamps, not a duration)
    assert a.first_byte_at < b.first_byte_at and b.requested_at < a.arrived_at
    shards = proxy.shard_requests()
    assert len(shards) == 2 and len({r.client_port for r in shards}) == 1


def test_when_the_response_ahead_breaks_the_request_behind_it_is_sent_again_on_a_fresh_connection(proxy):
    transport = slow_transport(proxy)
    proxy.add(r"/shards/0/", "reset:2000")
    out = ride_behind(transport, proxy)
    transport.close()
    for index in (0, 1):
        got, loc = out[index]
        assert hashlib.sha256(got.data).hexdigest() == loc.sha256
    assert out[1][0].attempts == 1  # riding a connection that broke is not an attempt of its own
    assert len({r.client_port for r in proxy.shard_requests()}) >= 2


def test_a_request_cancelled_while_it_waits_leaves_the_response_ahead_whole_and_its_connection_unpooled(proxy):
    transport = slow_transport(proxy)
    out = ride_behind(transport, proxy, cancel=threading.Event())
    got, loc = out[0]
    assert hashlib.sha256(got.data).hexdigest() == loc.sha256
    assert isinstance(out[1], EditCancelled)
    used = {r.client_port for r in proxy.shard_requests()}
    path, loc = shard(transport, 2)
    transport.download(path, sha256=loc.sha256, length=loc.length)
    transport.close()
    assert proxy.requests[-1].client_port not in used  # its response was never read: closed, not reused


@pytest.mark.parametrize("ride", [False, True])
def test_a_lone_shard_download_is_the_same_riding_or_not(proxy, ride):
    transport = HttpTransport(proxy.url)
    path, loc = shard(transport, 0)
    got = transport.download(path, sha256=loc.sha256, length=loc.length, ride=ride)
    transport.close()
    assert hashlib.sha256(got.data).hexdigest() == loc.sha256 and got.attempts == 1
