"""The timeline's idle-link measure on a hand-made edit."""

from __future__ import annotations

import pytest

from sakura.edge_client import Timeline
from sakura.edge_client.timeline import ShardTiming


def test_idle_link_is_counted_from_the_last_byte_of_every_response_before():
    shards = [ShardTiming(0, first_byte_at=1.0, arrived_at=2.0),  # 0.5 s after the preamble
              ShardTiming(1, first_byte_at=1.5, arrived_at=3.0),  # overlaps shard 0: no idle link
              ShardTiming(2, level="compute", source="computed", first_byte_at=2.5, arrived_at=9.0),  # cancelled
              ShardTiming(3, first_byte_at=3.25, arrived_at=4.0)]  # 0.25 s after shard 1's last byte
    gaps = Timeline("test", shards, preamble_s=0.5).link_gaps()
    assert gaps == pytest.approx([0.5, 0.0, 0.25])


def test_the_time_the_first_packet_takes_on_the_link_is_not_idle():
    """A response's first byte is read once its first packet has crossed: at 1,500 bytes a second,
    a 1,500-byte packet keeps the link busy for the first second of the gap."""
    shards = [ShardTiming(0, bytes=3000, first_byte_at=2.5, arrived_at=4.5),  # 1,500 B/s
              ShardTiming(1, bytes=1500, first_byte_at=5.0, arrived_at=5.5)]  # 3,000 B/s: its packet took 0.5 s
    timeline = Timeline("test", shards, preamble_s=0.5)
    assert timeline.link_gaps() == pytest.approx([2.0, 0.5])
    assert timeline.link_gaps(first_read_bytes=1500) == pytest.approx([1.0, 0.0])
