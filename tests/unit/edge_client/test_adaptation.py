"""A fresh session keeps the link busy from its first shard on: an order of events on a live edit.
The adaptation to a link that falls mid-edit is checked by the simulator's replay of the real
trace (``tests/unit/evaluation/test_adaptation_replay.py``) and measured live by
``bench/adaptation.py`` (``tests/adaptation_edits.py``)."""

from __future__ import annotations

from sakura.edge_client import EdgeSession
from sakura.emulation import TraceLink
from sakura.emulation.traces import BandwidthTrace
from sakura.platform.images import load_image
from tests.adaptation_edits import PHOTO, TEMPLATE


def test_a_fresh_session_keeps_the_link_busy_from_its_first_shard_on(api, reference_model):
    """No rate known yet: the second request leaves when the first response's first byte arrives, so
    the second response follows the first without a round trip of idle link."""
    rtt = 0.1  # long enough that scheduling noise on a busy machine cannot pass for it
    link = TraceLink(BandwidthTrace.constant(0.3), rtt_s=rtt)  # 12-18 kB shards: 0.3-0.5 s each
    with EdgeSession(api.url, link=link, models=lambda _: reference_model) as session:
        link.start()
        shards = session.edit(load_image(PHOTO), TEMPLATE, 1, "fixed-medium").timeline.shards
    # without a rate, "near done" is the first byte: the second request leaves between the first
    # response's first byte and its last (an order on one clock, not a duration)
    assert shards[0].first_byte_at <= shards[1].requested_at < shards[0].arrived_at
