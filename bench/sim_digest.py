"""Digest of every simulated timeline over a fixed scenario set: a refactor of the simulator, the
fetch loop or the planner that must not change a figure is checked by two runs, before and after.

    python bench/sim_digest.py --save-geometries /tmp/geo.pkl   # once: measure the geometries
    python bench/sim_digest.py --geometries /tmp/geo.pkl --json /tmp/before.json   # old code
    python bench/sim_digest.py --geometries /tmp/geo.pkl --json /tmp/after.json    # new code
    python bench/sim_digest.py --compare /tmp/before.json /tmp/after.json

The geometries are measured once and reused (the reference model's compute is timed live, so a
fresh measurement would differ): the analytic ``kontext-ref512``, ``sd35m-ref512`` and
``klein-4b-ref1024`` on flagship-npu (conservative rates) and two of the reference model's
templates. Each is simulated for every system over constant links (20, 150, 800 Mbit/s) and two
traces of each of four real families, cold, primed and warm; the per-step workloads on fewer
traces and starts (each of their edits is long to simulate). 2,880 timelines in all; about 30
minutes on this machine. The pickle is a local scratch file of this tool, read only from a path
the caller gives.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pickle
import sys
import tempfile
from pathlib import Path

from _args import bench_parser
from _simulation import analytic_rates

from sakura.emulation.traces import BandwidthTrace, load_traces
from sakura.evaluation.profiles import device_profile
from sakura.evaluation.simulator import SYSTEMS, EditSimulator
from sakura.evaluation.workloads import measure_workload, workload_geometries, workload_spec

ANALYTIC = ("kontext-ref512", "sd35m-ref512", "klein-4b-ref1024")
#: Per workload: how many traces (from the end of the list: the constant links first) and starts.
SUBSET = {"kontext-ref512": (3, (0.0,)), "sd35m-ref512": (11, (0.0,))}
STATES = {"cold": {"cold": True}, "primed": {}, "warm": {"warm_template": True}}


def save_geometries(path: Path) -> None:
    import argparse

    with tempfile.TemporaryDirectory() as workdir:
        reference = measure_workload("reference", f"file://{workdir}/lib", repeats=1, ratios=(1,))
    rates, _ = analytic_rates(argparse.Namespace(codec="v2", rates="conservative", codec_bench=None), reference)
    out = {name: workload_geometries(workload_spec(name), device_profile("flagship-npu"), reference, rates)[:1]
           for name in ANALYTIC}
    out["reference"] = list(reference.geometries)[:2]
    path.write_bytes(pickle.dumps(out))


def digests(geometries: dict, traces_root: Path) -> dict[str, str]:
    families = load_traces(traces_root)
    traces = [t for family in ("norway-hsdpa", "lumos-4g", "lumos-5g", "fcc-broadband") for t in families[family][:2]]
    traces += [BandwidthTrace.constant(rate, duration=1e5) for rate in (20, 150, 800)]
    out = {}
    for name, edits in geometries.items():
        count, starts = SUBSET.get(name, (len(traces), (0.0, 7.5)))
        for gi, g in enumerate(edits):
            for trace in traces[::-1][:count]:
                for start in starts:
                    for state, kw in STATES.items():
                        sim = EditSimulator(g, trace, start, rtt_s=0.055, **kw)
                        for system in SYSTEMS:
                            blob = repr(dataclasses.asdict(sim.run(system))).encode()
                            key = f"{name}/{gi}/{trace.family}:{trace.name}/{start}/{state}/{system}"
                            out[key] = hashlib.sha256(blob).hexdigest()[:16]
        print(name, len(out), flush=True)
    return out


def main() -> int:
    p = bench_parser(__doc__)
    p.add_argument("--traces", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "traces")
    p.add_argument("--save-geometries", type=Path, help="measure the geometries and write them here")
    p.add_argument("--geometries", type=Path, help="the geometries --save-geometries wrote")
    p.add_argument("--compare", type=Path, nargs=2, help="two digest JSONs: exit 1 where any timeline differs")
    args = p.parse_args()
    if args.save_geometries:
        save_geometries(args.save_geometries)
        return 0
    if args.compare:
        a, b = (json.loads(path.read_text()) for path in args.compare)
        differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        print(f"{len(a)} and {len(b)} timelines; {len(differ)} differ", *differ[:20], sep="\n")
        return 1 if differ else 0
    if not args.geometries:
        p.error("--geometries (or --save-geometries, or --compare)")
    out = digests(pickle.loads(args.geometries.read_bytes()), args.traces)  # noqa: S301 (our own scratch file)
    total = hashlib.sha256(json.dumps(out, sort_keys=True).encode()).hexdigest()[:16]
    print(f"{len(out)} timelines, digest {total}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=0, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
