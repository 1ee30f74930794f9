"""Joules per edit beside latency, for every system and workload of the end-to-end comparison,
and sustained sessions on a phone that heats up.

    python bench/energy.py --json bench/out/energy.json --plots bench/out/energy

Per workload (``sakura.evaluation.workloads``; analytic ones on ``flagship-npu``, the reference
model measured here on ``this-machine``): every system simulated from the same start times of
every trace (cold phone, as ``bench/e2e.py``), each edit's timeline priced state by state
(``sakura.evaluation.energy``: the radio each trace family was recorded on, the ``flagship``
phone's compute, decode and screen power). Then:

* ``families.<group>.<system>``: ``joules_median`` beside ``latency_median_s``, and the median of
  each state's joules;
* ``regime``: each system's median joules and seconds on constant links from 0.5 Mbit/s to
  2 Gbit/s (LTE's power model; 5G's above 100 Mbit/s), and the rates where on-device and SAKURA
  cross, in joules and in seconds;
* ``sustained``: ``--session-edits`` edits, one every ``--session-every`` seconds, each of a template
  the phone does not hold, on a phone that throttles (``sakura.evaluation.thermal``) and one that
  does not, over one start per trace: per edit, median latency and joules.

SAKURA's fetch-only variants are not simulated where hopeless (their lower bound over 20x the stock
on-device edit, ``sakura.evaluation.regime``): their medians are over the other edits, and
``hopeless_runs`` says how many.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from sakura.evaluation.energy import PHONES, RADIOS, EditEnergy, edit_energy, radio_for
from sakura.evaluation.profiles import device_profile
from sakura.evaluation.regime import crossovers, hopeless, link_rates
from sakura.evaluation.runs import groups, simulate_runs
from sakura.evaluation.simulator import SYSTEMS, EditSimulator
from sakura.evaluation.sustained import session_summary, sustained_session
from sakura.evaluation.thermal import NEVER_THROTTLES, ThermalModel
from sakura.evaluation.workloads import Analytic, measure_workload, workload_geometries, workload_spec
from sakura.platform.traces import BandwidthTrace, load_traces

DEFAULT_WORKLOADS = ("reference", "klein-4b-ref512", "klein-4b-ref1024", "klein-9b-ref1024", "kontext-ref512",
                     "sd35m-ref512")
MAP_SYSTEMS = ("sakura", "sakura-fetch-only", "cachegen", "on-device", "on-device-prepared")
SESSION_SYSTEMS = ("sakura", "sakura-fetch-only", "cachegen", "on-device", "on-device-prepared")
#: Above this rate the map prices the radio as 5G (LTE's measured links stay below it: lumos-4g's
#: fastest second is about 100 Mbit/s).
FIVE_G_ABOVE_MBPS = 100.0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--traces", default=str(Path(__file__).resolve().parents[2] / "shared" / "traces"))
    p.add_argument("--json", type=Path)
    p.add_argument("--plots", type=Path)
    p.add_argument("--workload", action="append", help=f"repeatable (default: {', '.join(DEFAULT_WORKLOADS)})")
    p.add_argument("--phone", default="flagship", choices=sorted(PHONES))
    p.add_argument("--starts", type=int, default=5, help="start times per trace")
    p.add_argument("--points", type=int, default=19, help="link rates on the map")
    p.add_argument("--session-edits", type=int, default=20)
    p.add_argument("--session-every", type=float, default=10.0, help="seconds between session edits' starts")
    p.add_argument("--rtt-ms", type=float, default=40.0)
    p.add_argument("--server-ms", type=float, default=15.0)
    p.add_argument("--repeats", type=int, default=3, help="timed repetitions per compute measurement")
    args = p.parse_args(argv)
    started = time.time()
    families = load_traces(args.traces)
    rtt = (args.rtt_ms + args.server_ms) / 1000
    phone = PHONES[args.phone]
    with tempfile.TemporaryDirectory(prefix="sakura-energy-") as workdir:
        print("building and measuring the reference model's example templates ...", flush=True)
        reference = measure_workload("reference", f"file://{workdir}/lib", repeats=args.repeats, ratios=(1,))
    floor = max(set(reference.floors), key=reference.floors.count)
    out: dict = {"setup": {"phone": vars(phone), "radios": {n: vars(r) for n, r in RADIOS.items()},
                           "family_radio": {f: radio_for(f).name for f in families},
                           "thermal": vars(ThermalModel()), "rtt_ms": args.rtt_ms, "server_ms": args.server_ms,
                           "starts_per_trace": args.starts, "session_edits": args.session_edits,
                           "session_every_s": args.session_every},
                 "workloads": {}}
    for name in args.workload or DEFAULT_WORKLOADS:
        spec = workload_spec(name)
        profile = device_profile("flagship-npu" if isinstance(spec, Analytic) else "this-machine")
        geometries = workload_geometries(spec, profile, reference)
        print(f"{name} on {profile.name}: {geometries[0].shards} shards, compute {geometries[0].compute_s:.2f} s",
              flush=True)
        report = _families(geometries, families, rtt, floor, phone, args.starts)
        report["device_profile"] = profile.name
        report["regime"] = _regime(geometries, rtt, floor, phone, args.points)
        report["sustained"] = _sustained(geometries[0], families, rtt, phone, args)
        out["workloads"][name] = report
        _print(name, report)
        if args.plots:
            _plot(args.plots, name, report)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1))
    print(f"done in {time.time() - started:.0f} s")
    return 0


def _families(geometries, families, rtt, floor, phone, starts) -> dict:
    runs = simulate_runs(geometries, families, starts=starts, rtt_s=rtt, floors=[floor] * len(geometries),
                         skip_hopeless=True)
    priced: dict[str, dict[str, list[tuple[float, EditEnergy]]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        for system, edit in r.edits.items():
            priced[r.family][system].append((edit.latency_s, edit_energy(edit, radio_for(r.family), phone)))
    table: dict = {}
    for group, members in groups(list(priced)).items():
        table[group] = {}
        for system in SYSTEMS:
            edits = [e for f in members for e in priced[f].get(system, [])]
            if edits:
                table[group][system] = _stats(edits)
        table[group]["hopeless_runs"] = sum(1 for r in runs if r.family in members and "sakura-fetch-only" not in r.edits)
    return {"families": table}


def _stats(edits: list[tuple[float, EditEnergy]]) -> dict:
    out = {"latency_median_s": float(np.median([s for s, _ in edits])),
           "joules_median": float(np.median([e.total_j for _, e in edits])),
           "joules_p90": float(np.percentile([e.total_j for _, e in edits], 90)), "edits": len(edits)}
    for part in ("radio_j", "compute_j", "decode_j", "base_j"):
        out[f"{part}_median"] = float(np.median([getattr(e, part) for _, e in edits]))
    return out


def _regime(geometries, rtt, floor, phone, points) -> dict:
    rates = link_rates(points=points)
    joules: dict[str, list[float | None]] = {s: [] for s in MAP_SYSTEMS}
    seconds: dict[str, list[float | None]] = {s: [] for s in MAP_SYSTEMS}
    for rate in rates:
        radio = RADIOS["5g-nsa" if rate > FIVE_G_ABOVE_MBPS else "lte"]
        sims = [EditSimulator(g, BandwidthTrace.constant(rate, duration=1e7), 0.0, rtt_s=rtt, cachegen_floor=floor)
                for g in geometries]
        for system in MAP_SYSTEMS:
            edits = [None if system.startswith("sakura-") and hopeless(sim) else sim.run(system) for sim in sims]
            done = [e for e in edits if e is not None]
            full = len(done) == len(edits)
            joules[system].append(float(np.median([edit_energy(e, radio, phone).total_j for e in done]))
                                  if full else None)
            seconds[system].append(float(np.median([e.latency_s for e in done])) if full else None)
    ratio = {kind: [None if a is None or b is None else a / b for a, b in zip(table["on-device"], table["sakura"])]
             for kind, table in (("joules", joules), ("seconds", seconds))}
    return {"rates_mbps": rates, "joules_median": joules, "latency_median_s": seconds,
            "ondevice_over_sakura": ratio,
            "crossovers_mbps": {kind: crossovers(rates, values) for kind, values in ratio.items()}}


def _sustained(geometry, families, rtt, phone, args) -> dict:
    out: dict = {}
    for label, thermal in (("throttling", ThermalModel()), ("never-throttles", NEVER_THROTTLES)):
        sessions: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
        for family, traces in families.items():
            for trace in traces:
                skip = hopeless(EditSimulator(geometry, trace, 0.0, rtt_s=rtt))
                for system in SESSION_SYSTEMS:
                    if skip and system.startswith("sakura-"):
                        continue
                    sessions[family][system].append(sustained_session(
                        geometry, trace, 0.0, system, edits=args.session_edits, every_s=args.session_every,
                        rtt_s=rtt, thermal=thermal, radio=radio_for(family), phone=phone))
        out[label] = {group: {system: session_summary(found)
                              for system in SESSION_SYSTEMS
                              if (found := [s for f in members for s in sessions[f][system]])}
                      for group, members in groups(list(sessions)).items()}
    return out


def _print(name: str, report: dict) -> None:
    overall = report["families"]["overall"]
    print(f"\n{name} ({report['device_profile']}): median joules / seconds per edit, all families")
    for system in SYSTEMS:
        if system in overall:
            s = overall[system]
            print(f"  {system:20s} {s['joules_median']:9.1f} J {s['latency_median_s']:9.2f} s  "
                  f"(radio {s['radio_j_median']:.1f}, compute {s['compute_j_median']:.1f}, "
                  f"decode {s['decode_j_median']:.1f}, screen {s['base_j_median']:.1f})")
    cross = report["regime"]["crossovers_mbps"]
    print(f"  on-device = SAKURA at {cross['joules']} Mbit/s in joules, {cross['seconds']} Mbit/s in seconds")
    for label, table in report["sustained"].items():
        ranks = {system: (v["first"]["latency_median_s"], v["last"]["latency_median_s"], v["last"]["joules_median"])
                 for system, v in table["overall"].items()}
        print(f"  session ({label}): " + "; ".join(f"{s} {a:.2f}->{b:.2f} s, last {j:.0f} J"
                                                  for s, (a, b, j) in ranks.items()))


def _plot(out: Path, name: str, report: dict) -> None:
    from sakura.evaluation.energy_plots import energy_latency, energy_regime, session_curves

    out.mkdir(parents=True, exist_ok=True)
    energy_latency(out / f"energy-latency-{name}.png", report["families"], name)
    energy_regime(out / f"energy-regime-{name}.png", report["regime"], name)
    session_curves(out / f"session-{name}.png", report["sustained"], name)


if __name__ == "__main__":
    sys.exit(main())
