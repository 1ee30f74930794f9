"""A phone that slows down under sustained load: how fast it computes after the work it has done.

Heat is counted in seconds of full compute load: it grows by the seconds the model (and the
decoder) keep the SoC busy and drains while it rests. Past ``onset_s`` of it the SoC runs at a
fraction of its peak that falls towards ``sustained_fraction``:

    speed = f + (1 - f) * exp(-(heat - onset) / settle)

Sources (published sustained-performance measurements; the fit's shape is an estimate):

* ``sustained_fraction`` 0.69: Galaxy S23 Ultra (Snapdragon 8 Gen 2, the chip whose power the
  ``flagship`` phone of :mod:`~sakura.evaluation.energy` uses), 3DMark Wild Life stress test
  stability (lowest over best of 20 one-minute loops) 69% (Gizmochina, 2023-10-06, 'Google Pixel 8
  benchmark results'; other flagships 52.5-78.9% in the same article).
* ``onset_s`` 120: Snapdragon 8 Gen 1 held ~60 FPS "in the first few minutes" and "gradually
  dropped after more than 2 minutes" in Genshin Impact (Golden Reviewer via meterpreter.org).
* ``settle_s`` 180: estimate; the iPhone 15 Pro Max had lost 37% by the 4th one-minute loop of 3DMark
  Wild Life Unlimited and 40% at the 20th (Notebookcheck), so most of the drop comes within minutes.
* ``cooling_s`` 300: estimate (heat drains with this time constant at rest); no source found.

A throttled SoC draws less power too: the model takes power proportional to speed (the same
joules per operation), an estimate; AnandTech measured phones settling at 3-5 W sustained from
7-12 W peaks (Galaxy S21 review), about the same proportion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ThermalModel:
    sustained_fraction: float = 0.69
    onset_s: float = 120.0
    settle_s: float = 180.0
    cooling_s: float = 300.0

    def speed(self, heat_s: float) -> float:
        """The fraction of its peak speed the SoC runs at with ``heat_s`` of load in it."""
        if heat_s <= self.onset_s:
            return 1.0
        f = self.sustained_fraction
        return f + (1.0 - f) * math.exp(-(heat_s - self.onset_s) / self.settle_s)

    def after(self, heat_s: float, busy_s: float, rest_s: float) -> float:
        """The heat after ``busy_s`` of load, then ``rest_s`` at rest."""
        return (heat_s + busy_s) * math.exp(-max(0.0, rest_s) / self.cooling_s)


#: A phone that never throttles (a cold-room bench): the comparison without the thermal model.
NEVER_THROTTLES = ThermalModel(sustained_fraction=1.0, onset_s=math.inf)
