"""Every system of the comparison over every trace of every family, from the same start times:
the loop ``bench/e2e.py`` and ``bench/regime.py`` share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sakura.edge_client.timeline import Timeline
from sakura.emulation.traces import BandwidthTrace
from sakura.evaluation.geometry import EditGeometry
from sakura.evaluation.simulator import FETCH_ONLY, SYSTEMS, EditSimulator

#: The cellular families of ``../shared/traces`` (pooled as ``cellular`` in the reports).
CELLULAR = ("norway-hsdpa", "mahimahi-cellular", "lumos-4g", "lumos-5g")
#: SAKURA's fetch-only variants are not simulated where even their lower bound takes this many
#: times the stock on-device edit (:func:`hopeless`).
GIVE_UP = 20.0


@dataclass
class Run:
    """One edit start: which family, trace, start second and geometry, and every system's edit."""

    family: str
    trace: BandwidthTrace
    start: float
    case: int
    sim: EditSimulator
    edits: dict[str, Timeline]
    bound: float


def simulate_runs(geometries: Sequence[EditGeometry], families: dict[str, list[BandwidthTrace]], *, starts: int,
                  rtt_s: float, warm_template: bool = False, floors: Sequence[str | None] | None = None,
                  systems: Sequence[str] = SYSTEMS, skip_hopeless: bool = False,
                  cachegen_slo_s: float | None = None) -> list[Run]:
    """``starts`` evenly spaced start times per trace; the geometries take turns. ``skip_hopeless``:
    SAKURA's fetch-only variants are not simulated where :func:`~sakura.evaluation.runs.hopeless`
    (absent from ``edits``; :func:`latencies` then counts their lower bound); the hybrid always is."""

    runs = []
    for family, traces in families.items():
        for t_index, trace in enumerate(traces):
            for k in range(starts):
                start = trace.duration * (k + 0.5) / starts
                which = (t_index * starts + k) % len(geometries)
                floor = floors[which] if floors else None
                sim = EditSimulator(geometries[which], trace, start, rtt_s=rtt_s, warm_template=warm_template,
                                    cachegen_floor=floor, cachegen_slo_s=cachegen_slo_s)
                skip = skip_hopeless and hopeless(sim)
                edits = {s: sim.run(s) for s in systems if not (skip and s in FETCH_ONLY)}
                runs.append(Run(family, trace, start, which, sim, edits, sim.bound()))
    return runs


def groups(families: Sequence[str]) -> dict[str, list[str]]:
    """Each family alone, then ``cellular`` and ``overall`` pooled (when they have members)."""
    pooled = {"cellular": [f for f in families if f in CELLULAR], "overall": list(families)}
    return {f: [f] for f in families} | {name: members for name, members in pooled.items() if members}


def latencies(runs: Sequence[Run], members: Sequence[str], system: str) -> list[float]:
    """Every edit of ``system`` in ``members``; a SAKURA edit not simulated (hopeless) counts as its
    lower bound, so a median over such runs is a lower bound too."""
    if system == "bound":
        return [r.bound for r in runs if r.family in members]
    return [r.edits[system].latency_s if system in r.edits else r.bound
            for r in runs if r.family in members and (system in r.edits or system in FETCH_ONLY)]


def stats(values: Sequence[float]) -> dict[str, float]:
    return {"median_s": float(np.median(values)), "p90_s": float(np.percentile(values, 90))}


#: ``ratios.<group>`` keys: the named system's median latency over SAKURA's.
RATIOS = {
    "cachegen_over_sakura": "cachegen",
    "cachegen_matched_over_sakura": "cachegen-matched",
    "ondevice_over_sakura": "on-device",
    "ondevice_uncached_over_sakura": "on-device-uncached",
    "ondevice_prepared_over_sakura": "on-device-prepared",
}


def ratio_table(medians: dict[str, float]) -> dict[str, float]:
    """The RATIOS, and SAKURA over the oracle and the bound, of the systems ``medians`` has."""
    out = {key: medians[system] / medians["sakura"] for key, system in RATIOS.items() if system in medians}
    for other in ("oracle", "bound"):
        if other in medians:
            out[f"sakura_over_{other}"] = medians["sakura"] / medians[other]
    return out


def summarize(runs: Sequence[Run], systems: Sequence[str],
              psnr_of: Callable[[Run, Timeline], float] | None = None) -> dict[str, dict]:
    """Per family and pooled group: ``families`` (``<system>.{median_s,p90_s[,psnr_db]}``, the bound
    included), ``ratios`` and ``hopeless_runs``: how many runs left SAKURA unsimulated
    (:func:`simulate_runs` ``skip_hopeless``), counted at their lower bound, which makes SAKURA's
    medians lower bounds and the ratios over SAKURA upper bounds where it is not 0."""
    out: dict[str, dict] = {"families": {}, "ratios": {}, "hopeless_runs": {}}
    for group, members in groups(list(dict.fromkeys(r.family for r in runs))).items():
        mine = [r for r in runs if r.family in members]
        table = {}
        for system in [*systems, "bound"]:
            values = latencies(mine, members, system)
            if len(values) < len(mine):
                continue
            table[system] = stats(values)
            if psnr_of is not None and system != "bound":
                table[system]["psnr_db"] = float(np.mean([psnr_of(r, r.edits[system]) for r in mine
                                                          if system in r.edits]))
        out["families"][group] = table
        medians = {s: v["median_s"] for s, v in table.items()}
        out["ratios"][group] = ratio_table(medians) if "sakura" in medians else {}
        out["hopeless_runs"][group] = sum(1 for r in mine if "sakura" not in r.edits)
    return out


def hopeless(sim: EditSimulator) -> bool:
    """SAKURA's edit cannot take less than :data:`GIVE_UP` times the stock on-device edit (its lower
    bound, fetching the smallest level of every shard, already does): not worth simulating."""
    return sim.bound() > GIVE_UP * sim.run("on-device").latency_s
