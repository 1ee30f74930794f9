"""Where SAKURA wins: the regime map of every workload and device profile.

    python bench/regime.py --json bench/out/regime.json --plots bench/out/regime

For each workload (``sakura.evaluation.workloads``) and device profile: CacheGen / SAKURA and the
three on-device baselines over SAKURA against the link rate (constant links from 0.5 Mbit/s to
2 Gbit/s, log scale, plus the round trip), cold and warm; the rates where each ratio crosses 1;
and the medians over the real traces of every family (``--traces``), placed at the family's mean
rate. The analytic workloads' bytes per level and decode cost come from ``--rates``: by default
the least compressible model a codec bench measured (``bench/out/codec-*.json``), or the reference
model's KV measured here (``--rates reference``, the optimistic bracket); the phone's rebuild of
transform levels' K/V, or its attention to their factors, is counted FLOPs, and so is their
compute, over the profile's throughput.

    python bench/regime.py --rates reference --json bench/out/regime-optimistic.json

``--update`` reruns only the ``--workload`` maps named and keeps the others; every map records the
run that wrote it (``provenance``), the file the last run.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from sakura.emulation.traces import load_traces
from sakura.evaluation.profiles import PROFILES, device_profile
from sakura.evaluation.regime import GIVE_UP, PAPER, link_rates, regime_curve
from sakura.evaluation.runs import RATIOS, simulate_runs, summarize
from sakura.evaluation.workloads import (
    WORKLOADS,
    Analytic,
    measure_workload,
    workload_geometries,
    workload_spec,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _args import bench_parser  # noqa: E402
from _provenance import kept_parts, provenance, run_stamp  # noqa: E402
from _simulation import SIMULATED, add_rates_options, analytic_rates, levels  # noqa: E402

SYSTEMS = ("sakura", *RATIOS.values())
DEFAULT_WORKLOADS = ("reference", "klein-4b-ref512", "klein-4b-ref1024", "klein-9b-ref1024", "kontext-ref512",
                     "sd35m-ref512")
ANALYTIC_PROFILES = ("flagship-npu", "flagship-gpu", "midrange")


def main(argv: list[str] | None = None) -> int:
    p = bench_parser(__doc__)
    p.add_argument("--traces", default=str(Path(__file__).resolve().parents[2] / "shared" / "traces"))
    p.add_argument("--plots", type=Path)
    p.add_argument("--workload", action="append", choices=sorted(WORKLOADS),
                   help=f"repeatable (default: {', '.join(DEFAULT_WORKLOADS)})")
    p.add_argument("--device-profile", action="append", choices=sorted(PROFILES),
                   help="repeatable (default: this-machine for measured workloads, "
                        f"{', '.join(ANALYTIC_PROFILES)} for analytic ones)")
    p.add_argument("--rtt-ms", type=float, default=40.0, help="network round trip per request")
    p.add_argument("--server-ms", type=float, default=15.0, help="server time to first byte (bench/e2e_live.py)")
    p.add_argument("--points", type=int, default=25, help="link rates on the map, 0.5 Mbit/s to 2 Gbit/s")
    p.add_argument("--starts", type=int, default=3, help="start times per trace for the family medians")
    p.add_argument("--repeats", type=int, default=3, help="timed repetitions per compute measurement")
    p.add_argument("--update", action="store_true", help="keep the other maps of an existing --json file")
    add_rates_options(p)
    args = p.parse_args(argv)
    started = time.time()
    rtt = (args.rtt_ms + args.server_ms) / 1000
    with tempfile.TemporaryDirectory(prefix="sakura-regime-") as workdir:
        print("measuring the reference model's templates (codec rates and the measured workload) ...", flush=True)
        reference = measure_workload("reference", f"file://{workdir}/lib", repeats=args.repeats, ratios=(1,),
                                     levels=levels(args))
    rates, rates_source = analytic_rates(args, reference)
    families = load_traces(args.traces)
    family_rate = {f: sum(t.period_bytes for t in ts) * 8e-6 / sum(t.duration for t in ts)
                   for f, ts in families.items()}
    out: dict = {"provenance": provenance(*SIMULATED),
                 "setup": {"rtt_ms": args.rtt_ms, "server_ms": args.server_ms, "starts_per_trace": args.starts,
                           "give_up": GIVE_UP, "paper": PAPER, "family_mean_mbps": family_rate},
                 "codec_rates": asdict(rates), "codec_rates_source": rates_source, "maps": {}}
    if args.update and args.json and args.json.exists():
        earlier = json.loads(args.json.read_text())
        kept_parts([entry for profiles in earlier["maps"].values() for entry in profiles.values()], earlier)
        out["maps"] = earlier["maps"]
    floor = max(set(reference.floors), key=reference.floors.count)
    for name in args.workload or DEFAULT_WORKLOADS:
        spec = workload_spec(name)
        profiles = args.device_profile or (ANALYTIC_PROFILES if isinstance(spec, Analytic) else ("this-machine",))
        for profile_name in profiles:
            profile = device_profile(profile_name)
            geometries = workload_geometries(spec, profile, reference, rates)
            entry = _map(name, geometries, families, family_rate, rtt, floor, args)
            out["maps"].setdefault(name, {})[profile_name] = entry
            _print(name, profile_name, entry)
            if args.plots:
                from sakura.evaluation.plots import regime_map

                args.plots.mkdir(parents=True, exist_ok=True)
                points = {f: (family_rate[f], r) for f, r in entry["families"]["ratios"].items() if f in families}
                g = geometries[0]
                title = (f"{name} on {profile_name}: KV {sum(g.raw_bytes) / 1e6:.0f} MB fp16 in {g.shards} shards\n"
                         f"compute: SAKURA {g.compute_s:.2f} s, "
                         f"stock on-device {g.ondevice_compute_s('on-device'):.2f} s, "
                         f"uncached {g.ondevice_compute_s('on-device-uncached'):.2f} s; "
                         f"cold phone, RTT {rtt * 1e3:.0f} ms")
                plot = args.plots / f"regime-{name}-{profile_name}.png"
                regime_map(plot, _curve(entry["cold"]), points, title, PAPER)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1))
    print(f"done in {time.time() - started:.0f} s")
    return 0


def _map(name, geometries, families, family_rate, rtt, floor, args) -> dict:
    g = geometries[0]
    grid = link_rates(points=args.points)
    cold = regime_curve(geometries, grid, rtt_s=rtt, cachegen_floor=floor)
    warm = regime_curve(geometries, grid, rtt_s=rtt, cachegen_floor=floor, warm_template=True)
    runs = simulate_runs(geometries, families, starts=args.starts, rtt_s=rtt, floors=[floor] * len(geometries),
                         systems=SYSTEMS, skip_hopeless=True)
    summary = summarize(runs, SYSTEMS)
    return {
        "workload": {"source": g.template, "model": g.model, "shards": g.shards, "steps": g.steps,
                     "kv_bytes_fp16": sum(g.raw_bytes), "bytes_per_level": {lv: sum(g.sizes[lv]) for lv in g.sizes},
                     "sakura_compute_s": g.compute_s,
                     "ondevice_compute_s": {s: g.ondevice_compute_s(s) for s in RATIOS.values() if "on-device" in s},
                     # on-device / SAKURA can be at most this: the stock pipeline's compute over SAKURA's.
                     "ondevice_over_sakura_bound": g.ondevice_compute_s("on-device") / g.compute_s,
                     "ondevice_uncached_over_sakura_bound": g.ondevice_compute_s("on-device-uncached") / g.compute_s,
                     "source_bytes": g.source_bytes, "context_bytes": g.context_bytes,
                     "prepared_bytes": g.prepared_bytes},
        "cold": asdict(cold), "warm": asdict(warm),
        "families": summary,
        "provenance": run_stamp(*SIMULATED),  # ``--update`` keeps the other maps with their own
    }


def _curve(data: dict):
    from sakura.evaluation.regime import RegimeCurve

    return RegimeCurve(**data)


def _print(name: str, profile: str, entry: dict) -> None:
    w = entry["workload"]
    print(f"\n{name} on {profile}: {w['shards']} shards, KV {w['kv_bytes_fp16'] / 1e6:.0f} MB, SAKURA compute "
          f"{w['sakura_compute_s']:.2f} s, on-device {w['ondevice_compute_s']['on-device']:.2f} s "
          f"(bound on-device/SAKURA {w['ondevice_over_sakura_bound']:.2f}, uncached "
          f"{w['ondevice_uncached_over_sakura_bound']:.2f})")
    crossovers = {k: [round(x, 1) for x in v] for k, v in entry["cold"]["crossovers_mbps"].items()}
    print("  crossovers (Mbit/s, cold):", crossovers)
    for family, r in entry["families"]["ratios"].items():
        cells = "  ".join(f"{k.replace('_over_sakura', '')} {v:.2f}" for k, v in r.items() if k in RATIOS)
        skipped = entry["families"]["hopeless_runs"][family]
        note = f"  (upper bounds: SAKURA at its lower bound in {skipped} runs)" if skipped else ""
        print(f"  {family:18s} {cells}{note}")


if __name__ == "__main__":
    sys.exit(main())
