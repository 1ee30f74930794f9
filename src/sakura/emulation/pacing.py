"""A small model paced like a real workload: the phone's compute and the link's rates scaled
together, so live edits of the tiny ``reference`` model (``sakura demo``) have a real workload's
ratio of compute to KV bytes.

The reference model's KV is tiny and computed in milliseconds here; a real workload's is tens
of megabytes a block, computed in tens of milliseconds on a phone's NPU. The emulation:

* each block of template KV the phone computes takes ``block_s`` (a :class:`PacedEditDevice`),
  so one real second lasts ``time_scale = block_s / workload_block_s`` demo seconds; the edit's
  own compute between shards, before the first and after the last takes the real workload's per
  block, times ``time_scale`` (an edit of the small model is the real workload cut to as many
  blocks);
* a real trace plays ``time_scale`` times slower, its rates times :func:`rate_scale` ``k``: a
  byte of the small model's KV then takes as long as ``workload_kv_bytes / model_kv_bytes``
  bytes of the real workload's KV on the real link.

Every byte on the link is scaled so, those of the manifest too; the small model's KV compresses
as it does, not as the real workload's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sakura.emulation.slow_device import PacedEditDevice
from sakura.emulation.traces import BandwidthTrace

__all__ = ["WorkloadPacing", "rate_scale", "scale_trace"]


def rate_scale(*, model_kv_bytes: float, workload_kv_bytes: float, workload_block_s: float, block_s: float) -> float:
    """``k``, the factor on a real trace's rates that makes the small model's KV bytes stand for a
    real workload's when the phone's compute is paced to ``block_s`` per block of template KV:

        k = (model_kv_bytes / workload_kv_bytes) x (workload_block_s / block_s)

    ``model_kv_bytes`` and ``workload_kv_bytes``: fp16 K + V of one block's template tokens, of the
    small model and of the real workload; ``workload_block_s``: the real device's seconds to compute
    one block of template KV. All must be positive and finite.
    """
    inputs = {"model_kv_bytes": model_kv_bytes, "workload_kv_bytes": workload_kv_bytes,
              "workload_block_s": workload_block_s, "block_s": block_s}
    for name, value in inputs.items():
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be positive and finite, not {value!r}")
    return (model_kv_bytes / workload_kv_bytes) * (workload_block_s / block_s)


def scale_trace(trace: BandwidthTrace, *, rate: float, time: float = 1.0) -> BandwidthTrace:
    """``trace`` with every rate times ``rate`` and every time (segment starts, duration) times
    ``time``: the same trace played ``time`` times slower, carrying ``rate`` times the bits."""
    if not (math.isfinite(rate) and rate > 0 and math.isfinite(time) and time > 0):
        raise ValueError(f"rate and time must be positive and finite, not {rate!r} and {time!r}")
    return BandwidthTrace(f"{trace.name} (x{rate:.3g} rate, x{time:.3g} time)", trace.family,
                          trace.starts * time, trace.mbps * rate, trace.duration * time)


@dataclass(frozen=True)
class WorkloadPacing:
    """The phone and the link of a small model paced as ``workload`` on ``profile``. The real
    device's seconds are per block: of template KV, and of the edit's own compute between two
    shards, before the first shard and after the last (each edit's whole, over its blocks)."""

    workload: str
    profile: str
    model_kv_bytes: int  # fp16 K + V of one block of the small model's template tokens
    workload_kv_bytes: int  # the same for the real workload
    workload_block_s: float  # the real device's seconds per block of template KV
    workload_interval_s: float  # its edit's own compute between two shards
    block_s: float  # demo seconds per block of template KV the phone computes
    workload_startup_s: float = 0.0  # its edit's compute before the first shard, per block
    workload_tail_s: float = 0.0  # its edit's compute after the last shard, per block

    def __post_init__(self) -> None:
        for name in ("workload_interval_s", "workload_startup_s", "workload_tail_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be finite and >= 0, not {value!r}")
        rate_scale(model_kv_bytes=self.model_kv_bytes, workload_kv_bytes=self.workload_kv_bytes,
                   workload_block_s=self.workload_block_s, block_s=self.block_s)  # checks them

    @property
    def rate_scale(self) -> float:
        """``k``: see :func:`rate_scale`."""
        return rate_scale(model_kv_bytes=self.model_kv_bytes, workload_kv_bytes=self.workload_kv_bytes,
                          workload_block_s=self.workload_block_s, block_s=self.block_s)

    @property
    def time_scale(self) -> float:
        """Demo seconds per real second."""
        return self.block_s / self.workload_block_s

    @property
    def bytes_scale(self) -> float:
        """Bytes of the real workload's KV one byte of the small model's stands for."""
        return self.workload_kv_bytes / self.model_kv_bytes

    @property
    def interval_s(self) -> float:
        """Demo seconds of the edit's own compute between two shards."""
        return self.workload_interval_s * self.time_scale

    def startup_s(self, blocks: int) -> float:
        """Demo seconds of compute before the first shard of an edit of ``blocks`` blocks."""
        return self.workload_startup_s * blocks * self.time_scale

    def tail_s(self, blocks: int) -> float:
        """Demo seconds of compute after the last shard of an edit of ``blocks`` blocks."""
        return self.workload_tail_s * blocks * self.time_scale

    def device(self, blocks: int) -> PacedEditDevice:
        """A phone for one edit of ``blocks`` blocks (one shard each): ``block_s`` per block of
        template KV it computes, ``interval_s`` between shards, and the startup and tail."""
        return PacedEditDevice(self.interval_s, self.block_s, shards=blocks, startup_s=self.startup_s(blocks),
                               tail_s=self.tail_s(blocks))

    def trace(self, real: BandwidthTrace) -> BandwidthTrace:
        """The link of the emulation: ``real`` played ``time_scale`` times slower at ``rate_scale`` its rates."""
        return scale_trace(real, rate=self.rate_scale, time=self.time_scale)
