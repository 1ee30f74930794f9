"""The regime map: each baseline's latency over SAKURA's against the link rate, on constant links,
and the rates where a ratio crosses 1 (``bench/regime.py``).

On a constant link the simulator's systems see one rate and one round trip; the map's x axis.
SAKURA is not simulated where even its lower bound (the smallest level of every shard, fetched
back to back) takes :data:`GIVE_UP` times the stock on-device edit: those points are ``None`` and
the curve stops there, saying "the phone alone wins by more than that".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from sakura.emulation.traces import BandwidthTrace
from sakura.evaluation.geometry import EditGeometry
from sakura.evaluation.runs import GIVE_UP, RATIOS, hopeless
from sakura.evaluation.simulator import FETCH_ONLY, EditSimulator

#: The paper's headline ratios (SAKURA over CacheGen adapted to DiT, over pure on-device).
PAPER = {"cachegen_over_sakura": 1.82, "ondevice_uncached_over_sakura": 3.27}
CURVES = ("cachegen_over_sakura", "ondevice_over_sakura", "ondevice_uncached_over_sakura",
          "ondevice_prepared_over_sakura")
__all__ = ["CURVES", "GIVE_UP", "PAPER", "RegimeCurve", "crossovers", "hopeless", "link_rates", "regime_curve"]


def link_rates(low: float = 0.5, high: float = 2000.0, points: int = 25) -> list[float]:
    """Mbit/s, evenly spaced on a log scale."""
    return [float(x) for x in np.geomspace(low, high, points)]


@dataclass
class RegimeCurve:
    rates_mbps: list[float]
    latency_s: dict[str, list[float | None]]  # system -> per rate (median over the geometries)
    ratios: dict[str, list[float | None]] = field(default_factory=dict)  # RATIOS key -> per rate
    crossovers_mbps: dict[str, list[float]] = field(default_factory=dict)  # rates where a ratio crosses 1


def regime_curve(geometries: Sequence[EditGeometry], rates_mbps: Sequence[float], *, rtt_s: float,
                 warm_template: bool = False, cachegen_floor: str | None = None) -> RegimeCurve:
    systems = ["sakura", *RATIOS.values()]
    rates = sorted(rates_mbps)
    latency: dict[str, list[float | None]] = {s: [] for s in systems}
    for rate in rates:
        link = BandwidthTrace.constant(rate, duration=1e7)
        sims = [EditSimulator(g, link, 0.0, rtt_s=rtt_s, warm_template=warm_template, cachegen_floor=cachegen_floor)
                for g in geometries]
        for system in systems:
            edits = [None if system in FETCH_ONLY and hopeless(sim) else sim.run(system).latency_s
                     for sim in sims]
            simulated = [e for e in edits if e is not None]
            latency[system].append(float(np.median(simulated)) if len(simulated) == len(edits) else None)
    curve = RegimeCurve(rates, latency)
    for key, system in RATIOS.items():
        curve.ratios[key] = [None if a is None or b is None else a / b
                             for a, b in zip(latency[system], latency["sakura"])]
        curve.crossovers_mbps[key] = crossovers(rates, curve.ratios[key])
    return curve


def crossovers(rates: Sequence[float], ratios: Sequence[float | None], level: float = 1.0) -> list[float]:
    """Rates where ``ratio`` crosses ``level``, interpolated linearly in log(rate) and log(ratio)."""
    out = []
    for (r0, a), (r1, b) in zip(zip(rates, ratios), list(zip(rates, ratios))[1:]):
        if a is None or b is None or (a - level) * (b - level) > 0 or a == b:
            continue
        la, lb, ll = math.log(a), math.log(b), math.log(level)
        w = (ll - la) / (lb - la)
        out.append(float(math.exp(math.log(r0) + w * (math.log(r1) - math.log(r0)))))
    return out
