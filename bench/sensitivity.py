"""How the headline ratios move when the evaluation's unsourced constants move.

    python bench/sensitivity.py --json bench/out/sensitivity.json

The paper-regime workload (``klein-4b-ref1024`` on ``flagship-npu``, cold phone) over every trace
family, once with the defaults and once per change of one constant: the network round trip (an
estimate: 40 ms), the server's time to first byte (measured ~14 ms, bench/e2e_live.py), the phone
CPU's decode speed (``cpu_factor``: a ratio of Geekbench scores whose value for this machine is an
estimate), the NPU's effective throughput (one figure per device, derived from one published
UNet timing: an estimate for a transformer), and CacheGen's SLO (its artifact's parameter; ours
defaults to the compute-only time).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from sakura.emulation.traces import load_traces
from sakura.evaluation.profiles import device_profile
from sakura.evaluation.runs import simulate_runs, summarize
from sakura.evaluation.simulator import SYSTEMS
from sakura.evaluation.workloads import WORKLOADS, analytic_geometry, measure_workload

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _args import bench_parser  # noqa: E402
from _provenance import provenance  # noqa: E402
from _simulation import SIMULATED, add_rates_options, analytic_rates, levels  # noqa: E402

HEADLINE = ("cachegen_over_sakura", "ondevice_over_sakura", "ondevice_uncached_over_sakura")
GROUPS = ("lumos-5g", "lumos-4g", "cellular", "overall")


def variants() -> list[tuple[str, dict]]:
    """(label, changes): ``rtt_ms``, ``server_ms``, ``cpu``, ``npu`` (factors) and ``slo`` (x compute)."""
    return [("defaults", {}), ("RTT 20 ms", {"rtt_ms": 20.0}), ("RTT 80 ms", {"rtt_ms": 80.0}),
            ("server 5 ms", {"server_ms": 5.0}), ("server 30 ms", {"server_ms": 30.0}),
            ("phone CPU decode 2x slower", {"cpu": 2.0}), ("phone CPU decode 2x faster", {"cpu": 0.5}),
            ("NPU throughput x0.5", {"npu": 0.5}), ("NPU throughput x2", {"npu": 2.0}),
            ("CacheGen SLO x2", {"slo": 2.0}), ("CacheGen SLO x4", {"slo": 4.0})]


def main(argv: list[str] | None = None) -> int:
    p = bench_parser(__doc__)
    p.add_argument("--traces", default=str(Path(__file__).resolve().parents[2] / "shared" / "traces"))
    p.add_argument("--workload", default="klein-4b-ref1024", choices=sorted(WORKLOADS))
    p.add_argument("--device-profile", default="flagship-npu")
    p.add_argument("--starts", type=int, default=3, help="start times per trace")
    add_rates_options(p)
    args = p.parse_args(argv)
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="sakura-sens-") as workdir:
        reference = measure_workload("reference", f"file://{workdir}/lib", repeats=2, ratios=(1,), levels=levels(args))
    (rates, rates_source), g0 = analytic_rates(args, reference), reference.geometries[0]
    floor = max(set(reference.floors), key=reference.floors.count)
    families, base = load_traces(args.traces), device_profile(args.device_profile)
    rows = {}
    for label, change in variants():
        anchor = replace(base.anchor, seconds=base.anchor.seconds / change.get("npu", 1.0))
        profile = replace(base, anchor=anchor, cpu_factor=base.cpu_factor * change.get("cpu", 1.0))
        g = analytic_geometry(WORKLOADS[args.workload], profile, rates, g0.levels, g0.cachegen_levels)
        rtt = (change.get("rtt_ms", 40.0) + change.get("server_ms", 15.0)) / 1000
        runs = simulate_runs([g], families, starts=args.starts, rtt_s=rtt, floors=[floor], skip_hopeless=True,
                             systems=[s for s in SYSTEMS if s != "oracle"],
                             cachegen_slo_s=change.get("slo", 1.0) * g.compute_s)
        ratios = summarize(runs, [s for s in SYSTEMS if s != "oracle"])["ratios"]
        rows[label] = {group: {k: ratios.get(group, {}).get(k) for k in HEADLINE} for group in GROUPS}
        row = rows[label]
        cells = "  ".join(f"{group}: " + "/".join("-" if row[group][k] is None else f"{row[group][k]:.2f}"
                                                  for k in HEADLINE) for group in GROUPS)
        print(f"{label:28s} {cells}", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"provenance": provenance(*SIMULATED), "workload": args.workload,
                                         "device_profile": args.device_profile, "codec_rates_source": rates_source,
                                         "ratios": list(HEADLINE), "rows": rows}, indent=1))
    print(f"(cachegen / on-device / on-device-uncached over sakura, medians)  done in {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
