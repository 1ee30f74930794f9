"""Emulate a slower phone: stretch every measured compute interval by ``factor``."""

from __future__ import annotations

import time

from sakura.edge_client.pipeline import Device


class SlowDevice(Device):
    def __init__(self, factor: float) -> None:
        if factor < 1.0:
            raise ValueError("a SlowDevice can only slow down: factor must be >= 1")
        self.factor = factor

    def after_compute(self, seconds: float) -> None:
        if self.factor > 1.0 and seconds > 0:
            time.sleep((self.factor - 1.0) * seconds)
