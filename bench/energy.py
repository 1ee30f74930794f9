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
* ``regime``: each system's median seconds, and joules under LTE's and 5G's power models, on
  constant links from 0.5 Mbit/s to 2 Gbit/s, and the rates where on-device and SAKURA cross, in
  seconds and in joules;
* ``sustained``: ``--session-edits`` edits, one every ``--session-every`` seconds, each of a template
  the phone does not hold, on a phone that throttles (``sakura.evaluation.thermal``) and one that
  does not, and back to back on one that throttles; over the first ``--session-traces`` traces of
  each family (SAKURA's fetch-only variants over those where they are not hopeless: ``sessions``
  says over how many): per edit, median latency and joules.

SAKURA's fetch-only variants are not simulated where hopeless (their lower bound over 20x the stock
on-device edit, ``sakura.evaluation.regime``): such an edit counts at its lower bound (seconds:
fetching the smallest level of every shard; joules: that long with the radio transferring and the
screen on), as ``bench/e2e.py`` counts it, so where ``hopeless_runs`` is not 0 their medians are
lower bounds.
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from sakura.emulation.traces import BandwidthTrace, load_traces
from sakura.evaluation.energy import PHONES, RADIOS, EditEnergy, PhonePower, RadioModel, edit_energy, radio_for
from sakura.evaluation.regime import crossovers, hopeless, link_rates
from sakura.evaluation.runs import groups, simulate_runs
from sakura.evaluation.simulator import FETCH_ONLY, SYSTEMS, EditSimulator
from sakura.evaluation.sustained import session_summary, sustained_session
from sakura.evaluation.thermal import NEVER_THROTTLES, ThermalModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _provenance import kept_parts, provenance, run_stamp  # noqa: E402
from _simulation import SIMULATED, analytic_rates, edits_of, parser, reference_workload, rtt_s  # noqa: E402

#: The code an energy figure depends on: the simulated edits', and the power and thermal models.
ENERGY = (*SIMULATED, "sakura.evaluation.energy", "sakura.evaluation.thermal", "sakura.evaluation.sustained")

#: The per-step models (``kontext-ref512``, ``sd35m-ref512``: 672-1,596 shards an edit) take ten
#: times as long to simulate: run them with fewer starts and ``--update`` (see docs/beyond.md).
DEFAULT_WORKLOADS = ("reference", "klein-4b-ref512", "klein-4b-ref1024", "klein-9b-ref1024")
#: Every system of the comparison but the oracle (a latency bound whose joules say little, and the
#: slowest to simulate).
FAMILY_SYSTEMS = tuple(s for s in SYSTEMS if s != "oracle")
MAP_SYSTEMS = ("sakura", "sakura-fetch-only", "cachegen", "on-device", "on-device-prepared")
SESSION_SYSTEMS = ("sakura", "sakura-fetch-only", "cachegen", "on-device", "on-device-prepared")
#: The radios the regime map prices every rate with.
MAP_RADIOS = ("lte", "5g-nsa")


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, DEFAULT_WORKLOADS)
    p.add_argument("--phone", default="flagship", choices=sorted(PHONES))
    p.add_argument("--starts", type=int, default=5, help="start times per trace")
    p.add_argument("--points", type=int, default=19, help="link rates on the map")
    p.add_argument("--session-edits", type=int, default=20)
    p.add_argument("--session-every", type=float, default=10.0, help="seconds between session edits' starts")
    p.add_argument("--session-traces", type=int, default=2, help="traces per family a session runs over")
    p.add_argument("--update", action="store_true", help="keep the other workloads of an existing --json file")
    args = p.parse_args(argv)
    started = time.time()
    families = load_traces(args.traces)
    rtt = rtt_s(args)
    phone = PHONES[args.phone]
    reference = reference_workload(args.repeats)
    floor = max(set(reference.floors), key=reference.floors.count)
    out: dict = {"provenance": provenance(*ENERGY),
                 "setup": {"phone": vars(phone), "radios": {n: vars(r) for n, r in RADIOS.items()},
                           "family_radio": {f: radio_for(f).name for f in families},
                           "thermal": vars(ThermalModel()), "rtt_ms": args.rtt_ms, "server_ms": args.server_ms,
                           "session_every_s": args.session_every},
                 "workloads": {}}
    if args.update and args.json and args.json.exists():  # the other workloads keep their own stamps
        earlier = json.loads(args.json.read_text())
        out["workloads"] = earlier["workloads"]
        rerun = args.workload or DEFAULT_WORKLOADS
        kept_parts([part for name, part in out["workloads"].items() if name not in rerun], earlier)
    rates = analytic_rates(args, reference)  # the codec bench JSON, read once for every workload
    for name in args.workload or DEFAULT_WORKLOADS:
        profile, geometries, rates_source = edits_of(name, reference, rates)
        print(f"{name} on {profile.name}: {geometries[0].shards} shards, compute {geometries[0].compute_s:.2f} s",
              flush=True)
        report = _families(geometries, families, rtt, floor, phone, args.starts)
        report.update(device_profile=profile.name, codec_rates_source=rates_source, starts_per_trace=args.starts,
                      session_traces=args.session_traces,
                      session_edits=args.session_edits)
        report["regime"] = _regime(geometries, rtt, floor, phone, args.points)
        report["sustained"] = _sustained(geometries[0], families, rtt, phone, args)
        report["provenance"] = run_stamp(*ENERGY)
        out["workloads"][name] = report
        _print(name, report)
        if args.plots:
            _plot(args.plots, name, report)
        if args.json:  # after every workload: a long run keeps what it finished
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(out, indent=1))
    print(f"done in {time.time() - started:.0f} s")
    return 0


def _families(geometries, families, rtt, floor, phone, starts) -> dict:
    runs = simulate_runs(geometries, families, starts=starts, rtt_s=rtt, floors=[floor] * len(geometries),
                         systems=FAMILY_SYSTEMS, skip_hopeless=True)
    priced: dict[str, dict[str, list[tuple[float, EditEnergy]]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        radio = radio_for(r.family)
        for system in FAMILY_SYSTEMS:
            if system in r.edits:
                edit = r.edits[system]
                priced[r.family][system].append((edit.latency_s, edit_energy(edit, radio, phone)))
            elif system in FETCH_ONLY:  # hopeless: its lower bound, as bench/e2e.py counts it
                priced[r.family][system].append((r.bound, _lower_bound(r.bound, radio, phone)))
    table: dict = {}
    hopeless_runs: dict[str, int] = {}
    for group, members in groups(list(priced)).items():
        table[group] = {}
        for system in FAMILY_SYSTEMS:
            edits = [e for f in members for e in priced[f].get(system, [])]
            if edits:
                table[group][system] = _stats(edits)
        hopeless_runs[group] = sum(1 for r in runs if r.family in members and "sakura-fetch-only" not in r.edits)
    return {"families": table, "hopeless_runs": hopeless_runs}


def _lower_bound(seconds: float, radio: RadioModel, phone: PhonePower) -> EditEnergy:
    """No fetching edit of ``seconds`` costs less than its radio transferring and its screen on throughout."""
    return EditEnergy(radio_j=radio.active_w * seconds, compute_j=0.0, decode_j=0.0, base_j=phone.base_w * seconds)


def _stats(edits: list[tuple[float, EditEnergy]]) -> dict:
    out = {"latency_median_s": float(np.median([s for s, _ in edits])),
           "joules_median": float(np.median([e.total_j for _, e in edits])),
           "joules_p90": float(np.percentile([e.total_j for _, e in edits], 90)), "edits": len(edits)}
    for part in ("radio_j", "compute_j", "decode_j", "base_j"):
        out[f"{part}_median"] = float(np.median([getattr(e, part) for _, e in edits]))
    return out


def _regime(geometries, rtt, floor, phone, points) -> dict:
    """Per radio of :data:`MAP_RADIOS`, over every rate (a radio's power model past the rates it was
    measured at is an extrapolation: the map shows where joules and seconds part, not a forecast)."""
    rates = link_rates(points=points)
    edits: dict[str, list] = {s: [] for s in MAP_SYSTEMS}  # per rate: every geometry's edit, or None
    for rate in rates:
        sims = [EditSimulator(g, BandwidthTrace.constant(rate, duration=1e7), 0.0, rtt_s=rtt, cachegen_floor=floor)
                for g in geometries]
        for system in MAP_SYSTEMS:
            done = [None if system in FETCH_ONLY and hopeless(sim) else sim.run(system) for sim in sims]
            edits[system].append(done if all(e is not None for e in done) else None)
    seconds = {s: [None if e is None else float(np.median([x.latency_s for x in e])) for e in per_rate]
               for s, per_rate in edits.items()}
    out: dict = {"rates_mbps": rates, "latency_median_s": seconds,
                 "ondevice_over_sakura_seconds": _ratio(seconds["on-device"], seconds["sakura"])}
    out["crossovers_mbps_seconds"] = crossovers(rates, out["ondevice_over_sakura_seconds"])
    for name in MAP_RADIOS:
        joules = {s: [None if e is None else float(np.median([edit_energy(x, RADIOS[name], phone).total_j for x in e]))
                      for e in per_rate] for s, per_rate in edits.items()}
        ratio = _ratio(joules["on-device"], joules["sakura"])
        out[name] = {"joules_median": joules, "ondevice_over_sakura_joules": ratio,
                     "crossovers_mbps_joules": crossovers(rates, ratio)}
    return out


def _ratio(a: list[float | None], b: list[float | None]) -> list[float | None]:
    return [None if x is None or y is None else x / y for x, y in zip(a, b)]


def _sustained(geometry, families, rtt, phone, args) -> dict:
    out: dict = {}
    cadences = (("throttling", ThermalModel(), args.session_every),
                ("never-throttles", NEVER_THROTTLES, args.session_every),
                ("back-to-back", ThermalModel(), 0.0))
    for label, thermal, every_s in cadences:
        sessions: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
        for family, traces in families.items():
            for trace in traces[:args.session_traces]:
                skip = hopeless(EditSimulator(geometry, trace, 0.0, rtt_s=rtt))
                for system in SESSION_SYSTEMS:
                    if skip and system in FETCH_ONLY:
                        continue
                    sessions[family][system].append(sustained_session(
                        geometry, trace, 0.0, system, edits=args.session_edits, every_s=every_s,
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
    regime = report["regime"]
    print(f"  on-device = SAKURA at {_rates(regime['crossovers_mbps_seconds'])} in seconds, "
          + ", ".join(f"{_rates(regime[r]['crossovers_mbps_joules'])} in joules ({r})" for r in MAP_RADIOS))
    for label, table in report["sustained"].items():
        print(f"  session ({label}), first -> last edit, and joules per edit over the session:")
        for system, v in table["overall"].items():
            per_edit = v["joules_total_median"] / len(v["per_edit"])
            print(f"    {system:20s} {v['first']['latency_median_s']:8.2f} -> {v['last']['latency_median_s']:8.2f} s "
                  f"(speed {v['last']['speed_median']:.2f}), {per_edit:7.1f} J")


def _rates(values: list[float]) -> str:
    return ", ".join(f"{v:.0f}" for v in values) + " Mbit/s" if values else "no rate"


def _plot(out: Path, name: str, report: dict) -> None:
    from sakura.evaluation.energy_plots import energy_latency, energy_regime, session_curves

    out.mkdir(parents=True, exist_ok=True)
    energy_latency(out / f"energy-latency-{name}.png", report["families"], name)
    energy_regime(out / f"energy-regime-{name}.png", report["regime"], name, MAP_RADIOS)
    session_curves(out / f"session-{name}.png", report["sustained"], name)


if __name__ == "__main__":
    sys.exit(main())
