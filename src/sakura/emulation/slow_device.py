"""Emulate a slower phone: stretch every measured compute interval by ``factor``."""

from __future__ import annotations

import time

from sakura.edge_client.device import Device


class SlowDevice(Device):
    def __init__(self, factor: float) -> None:
        if factor < 1.0:
            raise ValueError("a SlowDevice can only slow down: factor must be >= 1")
        self.factor = factor

    def after_compute(self, seconds: float) -> None:
        if self.factor > 1.0 and seconds > 0:
            time.sleep((self.factor - 1.0) * seconds)

    def after_template(self, seconds: float) -> None:
        self.after_compute(seconds)


class PacedDevice(Device):
    """Emulate a phone whose compute between two shards takes ``interval_s``, and each block of
    template KV it computes itself ``template_s`` (when this machine is faster): deterministic
    device timing for tests and live benchmarks."""

    def __init__(self, interval_s: float, template_s: float = 0.0) -> None:
        if interval_s < 0 or template_s < 0:
            raise ValueError("interval_s and template_s must be >= 0")
        self.interval_s, self.template_s = interval_s, template_s

    def after_template(self, seconds: float) -> None:
        if seconds < self.template_s:
            time.sleep(self.template_s - seconds)

    def after_compute(self, seconds: float) -> None:
        if seconds < self.interval_s:
            time.sleep(self.interval_s - seconds)


class PacedEditDevice(PacedDevice):
    """A :class:`PacedDevice` for one edit of ``shards`` shards that also paces the compute before
    the first shard (``startup_s``) and after the last (``tail_s``: the rest of the denoising and
    the decode). The edge client tells :meth:`after_compute` the compute before each shard it reads
    for the first time and once more at the end, so one device serves one edit. ``overrun_s``: the
    seconds this machine's own compute ran past the pacing (0 while the pacing holds)."""

    def __init__(self, interval_s: float, template_s: float, *, shards: int, startup_s: float, tail_s: float) -> None:
        super().__init__(interval_s, template_s)
        if shards < 1 or startup_s < 0 or tail_s < 0:
            raise ValueError("shards must be >= 1, startup_s and tail_s >= 0")
        self.shards, self.startup_s, self.tail_s = shards, startup_s, tail_s
        self.overrun_s = 0.0
        self._calls = 0

    def after_template(self, seconds: float) -> None:
        self._pace(seconds, self.template_s)

    def after_compute(self, seconds: float) -> None:
        call, self._calls = self._calls, self._calls + 1
        self._pace(seconds, self.startup_s if call == 0 else self.tail_s if call == self.shards else self.interval_s)

    def _pace(self, seconds: float, target: float) -> None:
        if seconds < target:
            time.sleep(target - seconds)
        else:
            self.overrun_s += seconds - target
