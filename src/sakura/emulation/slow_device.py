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
