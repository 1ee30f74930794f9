"""Where an app (or an emulator, :mod:`sakura.emulation`) hooks the phone's compute speed."""

from __future__ import annotations


class Device:
    """Hook for the compute stage's speed (see :class:`sakura.emulation.SlowDevice`)."""

    def after_compute(self, seconds: float) -> None:
        return None

    def after_template(self, seconds: float) -> None:
        """After the phone computed one block of template KV in ``seconds``."""
        return None
