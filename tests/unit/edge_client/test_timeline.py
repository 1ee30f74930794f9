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
