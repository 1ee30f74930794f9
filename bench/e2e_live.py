"""Validate the end-to-end simulator against real edits: real Ray Serve, a real shaped link
(network namespace + tbf when this machine allows it, else the in-process trace shaper), a real
model on this CPU (``--model``: ``reference``, or ``bench-flux``: 48 shards, 20 MB an edit at
compact, about 10 s of compute an edit here), real traces. Each edit runs in a fresh client
session and is simulated with the same trace, start time and a cold session (no bandwidth
samples, no compute calibration; the manifest and the template's context objects fetched
before the KV), from geometry measured on this machine (``measure_workload``).

The simulator takes compute as an input (a device profile); on this shared 2-core machine the
model's speed varies with whatever else runs, from one minute to the next. So each live edit
is compared twice: with the compute speed that edit had (its compute time less its stalls,
over the standalone measurement: ``simulated_s``, ``error``), which tests the link, fetch and
pipeline model, and with the speed a calibration on the unshaped loopback measured before the
live edits (``simulated_calibrated_s``, ``error_calibrated``), which also tests that the speed
held. The 1-minute load average is recorded with every edit.

    python bench/e2e_live.py --json bench/out/e2e_live.json
    python bench/e2e_live.py --model bench-flux --link kernel --json bench/out/e2e_live-bench-flux.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from _args import bench_parser
from _provenance import provenance

from sakura.edge_client import COMPUTE, EdgeSession, EditResult, Timeline, make_policy
from sakura.emulation import KernelLink, TraceLink, kernel_link_support
from sakura.emulation.traces import BandwidthTrace, load_trace
from sakura.evaluation import EditGeometry, EditSimulator, measure_workload
from sakura.evaluation.workload import DEFAULT_PHOTO, USER_PHOTOS, example_spec
from sakura.platform.images import fit_image, load_image
from sakura.platform.models import ModelAdapter, load_model

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
#: (trace file, start second) per model. reference (1.5 MB of KV an edit at full, ~0.1 s of
#: compute): a slow 3G tram ride, LTE falling from 67 to 3 Mbit/s, a driving LTE capacity trace, FCC.
#: bench-flux (20 MB an edit at compact, 40 MB at medium, ~10 s of compute): links on which an
#: edit ends within 1.5 minutes; 3G and FCC (under 2 Mbit/s: 2-6 minutes an edit) are left out.
#: * lumos-4g 50174 from 53 s: 67 Mbit/s, then 9, 3, 43, 27, 4, then 15-33: the dips land in the
#:   first seconds, while the link and the compute are close (medium needs ~32 Mbit/s);
#: * lumos-4g 50162 from 112 s: a steady 30-50 Mbit/s: the fetch keeps ahead of the model, so the
#:   edit is compute-bound (the pipeline's lead and its start-up are what is tested);
#: * mahimahi TMobile-LTE-driving from 200 s: a capacity trace at 1.4-12 Mbit/s, mostly 4-5: the
#:   edit is transfer-bound (35 s at compact, 80 s at medium).
CASES = {
    "reference": [("norway-hsdpa/norway_tram_21", 80.0), ("lumos-4g/4g_trace_driving_50174_dr", 53.0),
                  ("mahimahi-cellular/TMobile-LTE-driving.down", 200.0),
                  ("fcc-broadband/trace_26689_http---www.amazon.com", 100.0)],
    "bench-flux": [("lumos-4g/4g_trace_driving_50174_dr", 53.0), ("lumos-4g/4g_trace_driving_50162_dr", 112.0),
                   ("mahimahi-cellular/TMobile-LTE-driving.down", 200.0)],
}
SYSTEMS = {"sakura": "hybrid", "sakura-fetch-only": "mpc", "sakura-fixed-medium": "fixed-medium", "oracle": "oracle"}
TEMPLATE_INDEX = 1  # the example template edited (try-on, brick)


@dataclass(frozen=True)
class LiveCase:
    template_id: str
    photo: np.ndarray  # the user's photo at the model's resolution
    seed: int = 1


@dataclass(frozen=True)
class Calibration:
    server_s: float  # the server's time to first byte per request
    factor: float  # compute on the loopback next to the server, over the standalone measurement


@dataclass(frozen=True)
class Live:
    """Where and how the live edits run."""

    url: str  # the Serve app on the loopback
    case: LiveCase
    adapter: ModelAdapter
    rtt_s: float  # added by the link
    use_kernel: bool

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    stamp = provenance("sakura.edge_client", "sakura.serve", "sakura.evaluation", "sakura.emulation")  # as it starts
    kernel_ok, why = kernel_link_support()
    use_kernel = args.link == "kernel" or (args.link == "auto" and kernel_ok)
    link = "kernel (netns + veth + tbf, user-space RTT)" if use_kernel else "in-process trace shaper"
    print(f"model {args.model}; link: {link}"
          + ("" if kernel_ok else f" (kernel link unavailable: {why})") + f"; load {_load():.2f}", flush=True)
    import ray
    from ray import serve

    from sakura.serve.local import run_app

    workdir = tempfile.TemporaryDirectory(prefix="sakura-live-")
    library = args.library or f"file://{workdir.name}/lib"
    started = time.monotonic()
    workload = measure_workload(args.model, library, repeats=args.measure_repeats, ratios=(1,))
    geometry = workload.geometries[TEMPLATE_INDEX]
    measure_s = time.monotonic() - started
    print(f"built and measured in {measure_s:.0f} s: compute {geometry.compute_s:.3f} s an edit alone, "
          f"{geometry.shards} shards, {sum(geometry.sizes[geometry.levels[0]]) / 1e6:.1f} MB at "
          f"{geometry.levels[0]}", flush=True)
    adapter = load_model(args.model)
    case = _live_case(adapter)
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    report: dict[str, object] = {"provenance": stamp, "model": args.model, "link": "kernel" if use_kernel else "trace",
                                 "rtt_ms": args.rtt_ms, "compute_s_alone": geometry.compute_s,
                                 "build_and_measure_s": measure_s, "load_1min_start": _load()}
    try:
        live = Live(run_app(library), case, adapter, args.rtt_ms / 1000, use_kernel)
        cal = _calibrate(live, geometry)
        print(f"calibration on the unshaped loopback: server time per request {cal.server_s * 1e3:.1f} ms, compute "
              f"{cal.factor:.2f}x the standalone measurement (the server shares these 2 cores)", flush=True)
        report.update(server_ms=cal.server_s * 1e3, compute_factor=cal.factor,
                      compute_s=geometry.compute_s * cal.factor)
        rows = [_compare(live, load_trace(args.traces / trace_file), start, system, geometry, cal, args.repeats)
                for trace_file, start in CASES[args.model] if not args.only or args.only in trace_file
                for system in SYSTEMS]
    finally:
        serve.shutdown()
        ray.shutdown()
        workdir.cleanup()
    worst, worst_cal = (max(abs(r[key]) for r in rows) for key in ("error", "error_calibrated"))
    print(f"largest |simulated - measured| / measured: {worst:.1%} at each edit's compute speed, "
          f"{worst_cal:.1%} at the calibrated one")
    report.update(load_1min_end=_load(), rows=rows, worst_error=worst, worst_error_calibrated=worst_cal)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1))
    return 0


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = bench_parser(__doc__)
    p.add_argument("--model", choices=sorted(CASES), default="reference")
    p.add_argument("--traces", type=Path, default=TRACES)
    p.add_argument("--library", help="store URI to build the example templates into (kept; default: a temporary one)")
    p.add_argument("--rtt-ms", type=float, default=40.0)
    p.add_argument("--link", choices=["auto", "kernel", "trace"], default="auto")
    p.add_argument("--repeats", type=int, default=3, help="live edits per (trace, system); the median is reported")
    p.add_argument("--measure-repeats", type=int, default=5, help="timed runs per compute measurement (fastest kept)")
    p.add_argument("--only", help="run only the traces whose path contains this")
    return p.parse_args(argv)


def _live_case(adapter: ModelAdapter) -> LiveCase:
    """The edited template and its task's user photo (as :func:`~sakura.evaluation.workload.load_cases`)."""
    entry = example_spec().templates[TEMPLATE_INDEX]
    photo = fit_image(load_image(USER_PHOTOS.get(entry.task.value, DEFAULT_PHOTO)), adapter.resolution)
    return LiveCase(entry.id, photo)


def _compare(live: Live, trace: BandwidthTrace, start: float, system: str, geometry: EditGeometry, cal: Calibration,
             repeats: int) -> dict[str, object]:
    """``repeats`` live edits; the median one against the simulator with the compute speed it had (its
    compute time less its stalls, over the standalone measurement) and with the calibrated speed."""
    edits = sorted(((_live_edit(live, trace, start, SYSTEMS[system]), _load()) for _ in range(repeats)),
                   key=lambda e: e[0].latency_s)

    def simulate(factor: float) -> Timeline:
        simulator = EditSimulator(geometry.scaled(factor), trace, start, rtt_s=live.rtt_s + cal.server_s, cold=True)
        return simulator.run(system)

    median, load = edits[len(edits) // 2]
    factor = _compute_factor(median, geometry)
    sim, calibrated = simulate(factor), simulate(cal.factor)
    row = {"trace": f"{trace.family}/{trace.name}", "start_s": start, "system": system,
           "measured_s": median.latency_s, "simulated_s": sim.latency_s,
           "error": (sim.latency_s - median.latency_s) / median.latency_s, "compute_factor": factor,
           "simulated_calibrated_s": calibrated.latency_s,
           "error_calibrated": (calibrated.latency_s - median.latency_s) / median.latency_s,
           "measured_all_s": [e.latency_s for e, _ in edits],
           "compute_factors": [_compute_factor(e, geometry) for e, _ in edits], "load_1min": [lo for _, lo in edits],
           "live_levels": list(median.levels), "sim_levels": list(sim.levels),
           "live_stall_s": median.timeline.stall_s, "sim_stall_s": sim.stall_s,
           "live_bytes": median.bytes, "sim_bytes": sim.network_bytes,
           "live_gap_rtt": _gap_rtt(median.timeline, live.rtt_s), "sim_gap_rtt": _gap_rtt(sim, live.rtt_s),
           "packet_rtt": _packet_rtt(median.timeline, live.rtt_s),
           "live_idle_rtt": _gap_rtt(median.timeline, live.rtt_s, PACKET_BYTES),
           "live_shards": _shards(median.timeline), "sim_shards": _shards(sim)}
    print(f"  {row['trace']:48s} {system:20s} live {median.latency_s:7.3f} s  sim {sim.latency_s:7.3f} s  "
          f"({row['error']:+.1%}; calibrated {calibrated.latency_s:.3f} s, {row['error_calibrated']:+.1%})  "
          f"compute {factor:.2f}x  stall live {median.timeline.stall_s:.2f} sim {sim.stall_s:.2f}  "
          f"levels live {_letters(median.levels)} sim {_letters(sim.levels)}  "
          f"idle link between responses {_fmt(row['live_gap_rtt'])} RTT live, {_fmt(row['sim_gap_rtt'])} sim, "
          f"one packet {_fmt(row['packet_rtt'])}, idle beyond it {_fmt(row['live_idle_rtt'])}  "
          f"(load {load:.2f})", flush=True)
    return row


def _gap_rtt(timeline: Timeline, rtt_s: float, first_read_bytes: int = 0) -> float | None:
    """Mean idle link before each response after the preamble, in round trips (None: nothing
    fetched); with ``first_read_bytes``, less the time that many bytes take at its rate
    (:meth:`Timeline.link_gaps`)."""
    gaps = timeline.link_gaps(first_read_bytes)
    return statistics.mean(gaps) / rtt_s if gaps else None


#: One full Ethernet frame's payload (IEEE 802.3: 1500 bytes): a response's first byte is read only
#: once the packet carrying it (status line, headers, first body bytes) has crossed the link.
PACKET_BYTES = 1500


def _packet_rtt(timeline: Timeline, rtt_s: float) -> float | None:
    """What one packet takes to cross the link at each fetched response's own rate, in round trips
    (mean): the smallest gap first-byte timing can show between back-to-back responses."""
    times = [PACKET_BYTES * (s.arrived_at - s.first_byte_at) / s.bytes for s in timeline.shards
             if not s.computed and s.bytes and None not in (s.first_byte_at, s.arrived_at)
             and s.arrived_at > s.first_byte_at]
    return statistics.mean(times) / rtt_s if times else None


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _letters(levels: list[str]) -> str:
    """One letter per shard: its level's initial, ``X`` where the phone computed it."""
    return "".join("X" if lv == COMPUTE else lv[0] for lv in levels)


def _shards(timeline: Timeline) -> list[list[object]]:
    """Per shard of a live or simulated edit: level, requested, first byte, arrived, needed, consumed
    (s since the edit began)."""
    return [[s.level, *(_ms(t) for t in (s.requested_at, s.first_byte_at, s.arrived_at, s.needed_at, s.consumed_at))]
            for s in timeline.shards]


def _ms(t: float | None) -> float | None:
    return None if t is None else round(t, 4)


def _load() -> float:
    return os.getloadavg()[0]


def _calibrate(live: Live, geometry: EditGeometry, edits: int = 5) -> Calibration:
    """Unshaped loopback edits (no trace involved): the server's time to first byte per request,
    and how much slower the model computes next to a busy co-located server than alone."""
    firsts, factors = [], []
    case = live.case
    for _ in range(edits):
        with EdgeSession(live.url, models=lambda _: live.adapter) as session:
            result = session.edit(case.photo, case.template_id, "latest", "fixed-compact", seed=case.seed)
        shard = result.timeline.shards[0]
        firsts.append(shard.first_byte_at - shard.requested_at)
        factors.append(_compute_factor(result, geometry))
    return Calibration(statistics.median(firsts), statistics.median(factors))


def _compute_factor(result: EditResult, geometry: EditGeometry) -> float:
    """How much slower than the standalone measurement the model computed in this edit: its compute
    less its stalls, over the measured edit plus the measured template compute of the blocks it
    computed itself (a hybrid edit's template KV is compute too)."""
    t = result.timeline
    computed = geometry.template_compute_s([s.index for s in t.shards if s.computed])
    return (t.compute_end - t.compute_start - t.stall_s) / (geometry.compute_s + computed)


def _live_edit(live: Live, trace: BandwidthTrace, start: float, policy_name: str) -> EditResult:
    """One edit in a fresh client session, ``start`` seconds into ``trace``."""
    extra = {"trace": trace, "trace_time": lambda t: start + t} if policy_name == "oracle" else {}
    policy, case = make_policy(policy_name, **extra), live.case
    if live.use_kernel:
        with KernelLink(trace, ("127.0.0.1", live.port), rtt_s=live.rtt_s, offset_s=start) as link:
            session = EdgeSession(link.url, models=lambda _: live.adapter)
            try:
                return link.call(session.edit, case.photo, case.template_id, "latest", policy, seed=case.seed)
            finally:
                session.close()
    shaper = TraceLink(trace, rtt_s=live.rtt_s, offset_s=start)
    with EdgeSession(live.url, link=shaper, models=lambda _: live.adapter) as session:
        shaper.start()
        return session.edit(case.photo, case.template_id, "latest", policy, seed=case.seed)


if __name__ == "__main__":
    began = time.time()
    code = main()
    print(f"done in {time.time() - began:.0f} s")
    sys.exit(code)
