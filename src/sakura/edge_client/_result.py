"""What an edit returns: :class:`EditResult` (exported as ``sakura.edge_client.EditResult``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sakura.edge_client.planning import COMPUTE
from sakura.edge_client.timeline import Timeline

__all__ = ["EditResult"]


@dataclass(frozen=True)
class EditResult:
    """What :meth:`EdgeSession.edit` returns: the edited image and how the edit went."""

    image: np.ndarray
    """The edited image: a ``(R, R, 3)`` float32 RGB array with values in [0, 1], where ``R`` is
    the on-device model's resolution (``ModelAdapter.resolution``; 32 for the ``reference``
    model), whatever the photo's size: the photo is centre-cropped to a square and resized to
    ``R`` first. ``(image * 255).round().astype(np.uint8)`` makes it 8-bit."""
    timeline: Timeline
    """When each shard was fetched, decoded and used, from where and at what level, and every
    stall of the model: see :class:`~sakura.edge_client.timeline.Timeline`."""
    levels: list[str]
    """Per shard, in the order the model read them: the level fetched (e.g. ``"full"``,
    ``"compact"``), or ``"compute"`` (:data:`~sakura.edge_client.planning.COMPUTE`) where the
    phone computed the shard itself."""
    bytes: int
    """Shard bytes fetched over the network (0 when every shard came from the cache or was computed)."""
    latency_s: float
    """Seconds from the call to the finished image."""
    template: str
    """The template id edited with."""
    version: int
    """The template version edited with (an alias such as ``"latest"`` resolved to its number)."""

    @property
    def computed(self) -> list[int]:
        """The shards the phone computed itself instead of fetching."""
        return [i for i, level in enumerate(self.levels) if level == COMPUTE]
