"""A fresh session keeps the link busy from its first shard on: an order of events on a live edit.
The adaptation to a link that falls mid-edit is checked by the simulator's replay of the real
trace (``tests/unit/evaluation/test_adaptation_replay.py``) and measured live by
``bench/adaptation.py`` (``tests/adaptation_edits.py``)."""

from __future__ import annotations

from sakura.edge_client import EdgeSession, PlanContext
from sakura.edge_client.policy import FixedPolicy
from sakura.emulation.traces import BandwidthTrace
from sakura.platform.images import load_image
from tests.adaptation_edits import PHOTO, TEMPLATE
from tests.held_link import HANG_GUARD_S, HeldLink


def test_a_fresh_session_keeps_the_link_busy_from_its_first_shard_on(api, reference_model):
    """No rate known yet: the second request leaves when the first response's first byte arrives, so
    the second response follows the first without a round trip of idle link. The first shard's
    response is read in 1 kB chunks and held after its first until the next request leaves: a
    client that waited for its end is caught by the order of the stamps, however busy this machine."""
    link = HeldLink(BandwidthTrace.constant(0.3), rtt_s=0.1)
    with EdgeSession(api.url, link=link, models=lambda _: reference_model, timeout_s=10 * HANG_GUARD_S) as session:
        session.transport.chunk_bytes = 1 << 10  # a medium shard is 12-18 kB: many chunks
        link.start()
        # the edit's requests: the preamble, then shard 0's, whose response is held after its
        # first chunk until the next request (shard 1's) is made
        link.hold(lambda: link.requests > 2, after_chunks=1, skip=1)
        shards = session.edit(load_image(PHOTO), TEMPLATE, 1, "fixed-medium").timeline.shards
    assert link.chunks > 1  # the first shard's response was held after its first chunk
    # without a rate, "near done" is the first byte: the second request leaves between the first
    # response's first byte and its last (an order on one clock, not a duration)
    assert shards[0].first_byte_at <= shards[1].requested_at < shards[0].arrived_at


class _Recording:
    """``fixed-medium``, noting what the planner was told was still in flight at each choice."""

    name = "fixed-medium"

    def __init__(self) -> None:
        self.inner, self.in_flight = FixedPolicy("medium"), {}

    def choose(self, ctx: PlanContext) -> str:
        self.in_flight[ctx.index] = ctx.in_flight
        return self.inner.choose(ctx)

    def abandon(self, ctx: PlanContext, level: str, received: int, rate: float) -> str | None:
        return None


def test_the_planner_is_told_the_bytes_still_to_come_of_the_downloads_in_flight(api, reference_model):
    """When the second shard's level is chosen, the first shard's response is held after its first
    1 kB chunk: the context tells of it, its first bytes in, with its bytes still to come (the
    simulator's context says the same of its downloads, ``SimulatedLink.in_flight``), and nothing
    is in flight at the first choice."""
    link = HeldLink(BandwidthTrace.constant(0.3), rtt_s=0.1)
    policy = _Recording()
    with EdgeSession(api.url, link=link, models=lambda _: reference_model, timeout_s=10 * HANG_GUARD_S) as session:
        session.transport.chunk_bytes = 1 << 10
        link.start()
        link.hold(lambda: link.requests > 2, after_chunks=1, skip=1)  # shard 0's, until shard 1's leaves
        shards = session.edit(load_image(PHOTO), TEMPLATE, 1, policy).timeline.shards
    assert link.chunks > 1
    assert policy.in_flight[0] == ()
    (_, to_come), = policy.in_flight[1]
    assert shards[0].bytes - (1 << 10) <= to_come < shards[0].bytes
