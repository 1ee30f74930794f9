"""End-to-end edit latency over real bandwidth traces: SAKURA against its ablations, CacheGen
adapted to DiT, full-precision download, pure on-device generation and the oracle.

    python bench/e2e.py --traces ../shared/traces --json bench/out/e2e.json --plots bench/out/e2e

Builds the example templates for the reference model (in process, into --library), measures
each edit's geometry on this machine (shard bytes and decode times at every level of both
codecs, per-layer compute, the on-device time at template-to-request token ratios 1, 2, 4),
scales compute to --device-profile, then simulates every system from the same start times of
every trace (--starts per trace) with the edge client's own policy code. Fidelity is PSNR of the
really replayed output against the exact-KV output (100 dB: bit-identical).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from sakura.evaluation import (
    PROFILES,
    SYSTEMS,
    TOKEN_RATIOS,
    EditSimulator,
    FidelityTable,
    device_profile,
    measure_geometry,
)
from sakura.evaluation.workload import build_examples, example_spec, load_cases
from sakura.platform.models import Schedule, load_model
from sakura.platform.traces import load_traces

CELLULAR = ("norway-hsdpa", "mahimahi-cellular", "lumos-4g", "lumos-5g")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--traces", default=str(Path(__file__).resolve().parents[2] / "shared" / "traces"))
    p.add_argument("--json", type=Path)
    p.add_argument("--plots", type=Path)
    p.add_argument("--library", help="store URI of a library with the example templates (default: build one)")
    p.add_argument("--steps", type=int, help="denoising steps to build the templates for (default: the model's, 8)")
    p.add_argument("--device-profile", default="this-machine", choices=sorted(PROFILES))
    p.add_argument("--starts", type=int, default=10, help="start times per trace")
    p.add_argument("--rtt-ms", type=float, default=40.0, help="network round trip per request")
    p.add_argument("--server-ms", type=float, default=15.0,
                   help="server time to first byte per request (Ray Serve measured ~14 ms: bench/e2e_live.py)")
    p.add_argument("--repeats", type=int, default=5, help="timed repetitions per compute measurement")
    args = p.parse_args(argv)
    started = time.time()

    workdir = tempfile.TemporaryDirectory(prefix="sakura-e2e-")
    library = args.library or f"file://{workdir.name}/lib"
    spec = example_spec()
    if not args.library:
        print("building the example templates for the reference model ...", flush=True)
        build_examples(library, spec, steps=args.steps)
    adapter = load_model("reference")
    cases = load_cases(library, spec, adapter.resolution)
    profile = device_profile(args.device_profile)
    geometries, fidelity, floors = [], [], []
    for case in cases:
        g, decoded = measure_geometry(adapter, case.manifest, case.payloads, case.template, case.request,
                                      repeats=args.repeats)
        geometries.append(g.scaled(profile.compute_factor))
        schedule = Schedule(case.manifest.schedule.steps, case.manifest.schedule.strength)
        fidelity.append(FidelityTable(adapter, decoded, g.levels[-1], case.manifest.prompt, case.request, schedule))
        floors.append(_matched_floor(g, fidelity[-1]))
    print(_geometry_line(geometries[0], profile.name), flush=True)

    families = load_traces(args.traces)
    rtt = (args.rtt_ms + args.server_ms) / 1000
    runs: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    psnr: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    by_ratio: dict[str, dict[int, dict[str, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    examples: dict[str, dict] = {}
    for family, traces in families.items():
        for t_index, trace in enumerate(traces):
            for k in range(args.starts):
                start = trace.duration * (k + 0.5) / args.starts
                which = (t_index * args.starts + k) % len(geometries)
                sim = EditSimulator(geometries[which], trace, start, rtt_s=rtt, cachegen_floor=floors[which])
                for system in SYSTEMS:
                    edit = sim.run(system)
                    runs[family][system].append(edit.latency_s)
                    psnr[family][system].append(fidelity[which].psnr(edit.levels))
                    variety = len(set(edit.levels))  # plot the edit where adaptation shows most
                    if system == "sakura" and variety > examples.get(family, {}).get("variety", 0):
                        examples[family] = {"trace": trace, "start": start, "sim": sim, "variety": variety}
                runs[family]["bound"].append(sim.bound())
                for ratio in TOKEN_RATIOS:
                    scaled = EditSimulator(geometries[which].at_ratio(ratio), trace, start, rtt_s=rtt)
                    by_ratio[family][ratio]["sakura"].append(scaled.run("sakura").latency_s)
                    by_ratio[family][ratio]["on-device"].append(geometries[which].ondevice_s[ratio])
        print(f"  {family}: {len(traces)} traces x {args.starts} starts", flush=True)

    report = _report(runs, psnr, by_ratio, geometries, profile, args)
    _print_table(report)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1))
    if args.plots:
        from sakura.evaluation.plots import write_plots

        write_plots(args.plots, runs, examples)
    print(f"done in {time.time() - started:.0f} s")
    workdir.cleanup()
    return 0


def _matched_floor(g, fidelity: FidelityTable) -> str:
    """The coarsest CacheGen configuration at least as faithful as SAKURA's smallest level."""
    target = fidelity.psnr((g.levels[0],) * g.shards)
    for level in g.cachegen_levels:
        if fidelity.psnr((level,) * g.shards) >= target:
            return level
    return g.cachegen_levels[-1]


def _stats(values: list[float]) -> dict[str, float]:
    return {"median_s": float(np.median(values)), "p90_s": float(np.percentile(values, 90))}


def _report(runs, psnr, by_ratio, geometries, profile, args) -> dict:
    families = list(runs)
    pooled = {"cellular": [f for f in families if f in CELLULAR], "overall": families}
    groups = {f: [f] for f in families} | {name: members for name, members in pooled.items() if members}
    out: dict = {"families": {}, "ratios": {}, "ondevice_by_token_ratio": {}}
    for group, members in groups.items():
        table = {}
        for system in [*SYSTEMS, "bound"]:
            values = [v for f in members for v in runs[f][system]]
            table[system] = _stats(values)
            if system != "bound":
                table[system]["psnr_db"] = float(np.mean([v for f in members for v in psnr[f][system]]))
        out["families"][group] = table
        med = {s: table[s]["median_s"] for s in table}
        out["ratios"][group] = {
            "cachegen_over_sakura": med["cachegen"] / med["sakura"],
            "cachegen_matched_over_sakura": med["cachegen-matched"] / med["sakura"],
            "ondevice_over_sakura": med["on-device"] / med["sakura"],
            "sakura_over_oracle": med["sakura"] / med["oracle"],
            "sakura_over_bound": med["sakura"] / med["bound"],
            "cachegen_over_sakura_per_edit_median": float(np.median(
                [c / s for f in members for c, s in zip(runs[f]["cachegen"], runs[f]["sakura"])])),
        }
        out["ondevice_by_token_ratio"][group] = {
            str(r): float(np.median([v for f in members for v in by_ratio[f][r]["on-device"]]) /
                          np.median([v for f in members for v in by_ratio[f][r]["sakura"]]))
            for r in TOKEN_RATIOS}
    g = geometries[0]
    out["setup"] = {
        "model": g.model, "steps": g.steps, "shards": g.shards, "template_tokens": g.template_tokens,
        "request_tokens": g.request_tokens, "example_token_ratio": g.template_tokens / g.request_tokens,
        "device_profile": profile.name, "compute_factor": profile.compute_factor, "rtt_ms": args.rtt_ms,
        "server_ms": args.server_ms,
        "starts_per_trace": args.starts,
        "bytes_per_level": {lv: statistics.mean(sum(x.sizes[lv]) for x in geometries) for lv in g.sizes},
        "compute_only_s": statistics.mean(x.compute_s for x in geometries),
        "ondevice_s": {str(r): statistics.mean(x.ondevice_s[r] for x in geometries) for r in TOKEN_RATIOS},
    }
    return out


def _geometry_line(g, profile: str) -> str:
    sizes = ", ".join(f"{lv} {sum(g.sizes[lv]) / 1e3:.0f} kB" for lv in g.sizes)
    return (f"{g.template}: {g.shards} shards, {g.steps} steps, compute {g.compute_s * 1e3:.1f} ms, "
            f"on-device {g.ondevice_s[1] * 1e3:.1f} ms ({profile}); {sizes}")


def _print_table(report: dict) -> None:
    systems = [*SYSTEMS, "bound"]
    print(f"\n{'family':18s} " + " ".join(f"{s[:14]:>14s}" for s in systems) + "   cg/sak  cgm/sak od/sak  sak/orc")
    for family, table in report["families"].items():
        cells = " ".join(f"{table[s]['median_s']:8.3f}/{table[s]['p90_s']:<5.2f}" for s in systems)
        r = report["ratios"][family]
        print(f"{family:18s} {cells}   {r['cachegen_over_sakura']:6.2f}  {r['cachegen_matched_over_sakura']:6.2f}  "
              f"{r['ondevice_over_sakura']:6.2f}  "
              f"{r['sakura_over_oracle']:6.2f}")
    print("median/p90 seconds per edit")
    print("PSNR dB:", {s: round(report["families"]["overall"][s]["psnr_db"], 1) for s in SYSTEMS})
    print("on-device / sakura by token ratio:", {f: {r: round(v, 2) for r, v in d.items()}
                                                  for f, d in report["ondevice_by_token_ratio"].items()})


if __name__ == "__main__":
    sys.exit(main())
