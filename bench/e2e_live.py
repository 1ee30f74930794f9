"""Validate the end-to-end simulator against real edits: real Ray Serve, a real shaped link
(network namespace + tbf when this machine allows it, else the in-process trace shaper), the
real reference model on this CPU, real traces. Each edit runs in a fresh client session and is
simulated with the same trace, start time and a cold session (no bandwidth samples, no compute
calibration), from geometry measured on this machine.

    python bench/e2e_live.py --json bench/out/e2e_live.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sakura.edge_client import EdgeSession, make_policy
from sakura.edge_client.emulation import KernelLink, TraceLink, kernel_link_support
from sakura.evaluation import EditSimulator, measure_geometry
from sakura.evaluation.workload import build_examples, example_spec, load_cases
from sakura.platform.models import load_model
from sakura.platform.traces import load_trace

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
#: (trace file, start second): a slow 3G tram ride, LTE falling from 67 to 3 Mbit/s, a driving LTE capacity trace.
CASES = [("norway-hsdpa/norway_tram_21", 80.0), ("lumos-4g/4g_trace_driving_50174_dr", 53.0),
         ("mahimahi-cellular/TMobile-LTE-driving.down", 200.0), ("fcc-broadband/trace_26689_http---www.amazon.com", 100.0)]
SYSTEMS = {"sakura": "mpc", "sakura-fixed-medium": "fixed-medium", "oracle": "oracle"}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--traces", type=Path, default=TRACES)
    p.add_argument("--json", type=Path)
    p.add_argument("--rtt-ms", type=float, default=40.0)
    p.add_argument("--link", choices=["auto", "kernel", "trace"], default="auto")
    p.add_argument("--repeats", type=int, default=3, help="live edits per (trace, system); the median is reported")
    p.add_argument("--only", help="run only the traces whose path contains this")
    args = p.parse_args(argv)
    kernel_ok, why = kernel_link_support()
    use_kernel = args.link == "kernel" or (args.link == "auto" and kernel_ok)
    print(f"link: {'kernel (netns + veth + tbf, user-space RTT)' if use_kernel else 'in-process trace shaper'}"
          + ("" if kernel_ok else f" (kernel link unavailable: {why})"), flush=True)

    import ray
    from ray import serve

    from sakura.serve.local import run_app

    workdir = tempfile.TemporaryDirectory(prefix="sakura-live-")
    library = f"file://{workdir.name}/lib"
    spec = example_spec()
    build_examples(library, spec)
    adapter = load_model("reference")
    case = load_cases(library, spec, adapter.resolution)[1]
    geometry, _ = measure_geometry(adapter, case.manifest, case.payloads, case.template, case.request)
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    rows = []
    try:
        url = run_app(library)
        port = int(url.rsplit(":", 1)[1])
        server_s, factor = _calibrate(url, case, adapter, geometry)
        print(f"calibration on the unshaped loopback: server time per request {server_s * 1e3:.1f} ms, compute "
              f"{factor:.2f}x the standalone measurement (the server shares these 2 cores)", flush=True)
        geometry = geometry.scaled(factor)
        for trace_file, start in [c for c in CASES if not args.only or args.only in c[0]]:
            trace = load_trace(args.traces / trace_file)
            for system, policy_name in SYSTEMS.items():
                measured = []
                for _ in range(args.repeats):
                    measured.append(_live_edit(url, port, trace, start, policy_name, case, adapter, args.rtt_ms / 1000,
                                               use_kernel))
                sim = EditSimulator(geometry, trace, start, rtt_s=args.rtt_ms / 1000 + server_s, cold=True).run(system)
                live, live_levels = sorted(measured)[len(measured) // 2]
                rows.append({"trace": f"{trace.family}/{trace.name}", "start_s": start, "system": system,
                             "measured_s": live, "simulated_s": sim.latency_s, "error": (sim.latency_s - live) / live,
                             "sim_levels": list(sim.levels), "live_levels": list(live_levels)})
                print(f"  {trace.family + '/' + trace.name:48s} {system:20s} live {live:7.3f} s  "
                      f"sim {sim.latency_s:7.3f} s  ({rows[-1]['error']:+.1%})  levels live {''.join(l[0] for l in live_levels)}"
                      f" sim {''.join(l[0] for l in sim.levels)}", flush=True)
    finally:
        serve.shutdown()
        ray.shutdown()
        workdir.cleanup()
    worst = max(abs(r["error"]) for r in rows)
    print(f"largest |simulated - measured| / measured: {worst:.1%}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"link": "kernel" if use_kernel else "trace", "rtt_ms": args.rtt_ms,
                                         "server_ms": server_s * 1e3, "compute_factor": factor,
                                         "rows": rows, "worst_error": worst}, indent=1))
    return 0


def _calibrate(url, case, adapter, geometry, edits: int = 5) -> tuple[float, float]:
    """Unshaped loopback edits (no trace involved): the server's time to first byte per request,
    and how much slower the model computes next to a busy co-located server than alone."""
    firsts, factors = [], []
    for _ in range(edits):
        with EdgeSession(url, models=lambda _: adapter) as session:
            result = session.edit(case.request.image, case.manifest.template_id, "latest", "fixed-compact",
                                  seed=case.request.seed)
        t = result.timeline
        firsts.append(t.shards[0].first_byte_at - t.shards[0].requested_at)
        factors.append((t.compute_end - t.compute_start - t.stall_s) / geometry.compute_s)
    return statistics.median(firsts), statistics.median(factors)


def _live_edit(url, port, trace, start, policy_name, case, adapter, rtt_s, use_kernel) -> float:
    def policy():
        if policy_name == "oracle":
            return make_policy("oracle", trace=trace, trace_time=lambda t: start + t)
        return make_policy(policy_name)

    if use_kernel:
        with KernelLink(trace, ("127.0.0.1", port), rtt_s=rtt_s, offset_s=start) as link:
            session = EdgeSession(link.url, models=lambda _: adapter)
            try:
                result = link.call(session.edit, case.request.image, case.manifest.template_id, "latest", policy(),
                                   seed=case.request.seed)
                return result.latency_s, result.levels
            finally:
                session.close()
    link = TraceLink(trace, rtt_s=rtt_s, offset_s=start)
    with EdgeSession(url, link=link, models=lambda _: adapter) as session:
        link.start()
        result = session.edit(case.request.image, case.manifest.template_id, "latest", policy(), seed=case.request.seed)
        return result.latency_s, result.levels


if __name__ == "__main__":
    started = time.time()
    code = main()
    print(f"done in {time.time() - started:.0f} s")
    sys.exit(code)
