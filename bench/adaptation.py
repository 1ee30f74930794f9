"""Bandwidth adaptation when the link falls mid-edit: the adaptation tests' own edits, repeated.

Lumos 4G driving (``lumos-4g/4g_trace_driving_50174_dr``: 67 Mbit/s, then 9, then 3), the
reference model at 4 steps (6 shards), a phone paced at 80 ms per layer, 30 ms round trip. Per
policy: one ``fixed-full`` edit from 44 s of the trace to learn link and device, then the edit
under test from 53.8 s, in a fresh session each repeat (the functions of
``tests/adaptation_edits.py``). ``--link trace``: the in-process ``TraceLink``
in front of the shard API on uvicorn (that unit test's setting); ``--link kernel``: a
``KernelLink`` (netns + veth + tbf, needs root) in front of Ray Serve (the setting of
``tests/integration/edge_client/test_edge_service.py``, which reads from S3 where this reads
a local folder). Each run records the 1-minute load average: the stalls grow when other
processes share this machine's cores. A typed error an edit raises is recorded in its place.

    python bench/adaptation.py --repeats 10 --json bench/out/adaptation-trace-link.json
    python bench/adaptation.py --link kernel --repeats 10 --json bench/out/adaptation-kernel-link.json
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from _args import bench_parser  # noqa: E402
from _provenance import provenance  # noqa: E402

from sakura.edge_client import EditResult  # noqa: E402
from sakura.emulation import PacedDevice  # noqa: E402
from sakura.platform.errors import SakuraError  # noqa: E402
from sakura.platform.models import ModelAdapter, load_model  # noqa: E402
from tests.adaptation_edits import (  # noqa: E402
    LAYER_S,
    RTT_S,
    STEP_AT,
    TEMPLATE,
    TRACE,
    WARM_AT,
    edit_over_step_down,
    kernel_edit_over_step_down,
)
from tests.helpers import make_library  # noqa: E402

TEMPLATE_IMAGE = "skimage:astronaut"
POLICIES = ("fixed-full", "mpc")


def main(argv: list[str] | None = None) -> int:
    p = bench_parser(__doc__)
    p.add_argument("--link", choices=["trace", "kernel"], default="trace")
    p.add_argument("--trace", type=Path, default=TRACE)
    p.add_argument("--repeats", type=int, default=5, help="edit pairs per policy")
    args = p.parse_args(argv)
    stamp = provenance("sakura.edge_client", "sakura.emulation")  # the tree as the run starts
    model = load_model("reference")
    runs: list[dict[str, dict[str, object]]] = []
    with tempfile.TemporaryDirectory(prefix="sakura-adaptation-") as workdir, ExitStack() as stack:
        library = f"file://{workdir}/lib"
        make_library(library, [TEMPLATE_IMAGE], template_id=TEMPLATE, model="reference", steps=4)
        edit = _edit_fn(args.link, library, stack)
        for repeat in range(args.repeats):
            runs.append({policy: _measure(edit, model, policy, args.trace) for policy in POLICIES})
            for policy, row in runs[-1].items():
                print(f"  {repeat} {policy:10s} {_line(row)}", flush=True)
    summary = _summary(runs)
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "provenance": stamp,
            "link": args.link, "trace": f"{args.trace.parent.name}/{args.trace.name}", "warm_at_s": WARM_AT,
            "step_at_s": STEP_AT, "layer_s": LAYER_S, "rtt_s": RTT_S, "model": "reference", "steps": 4,
            "repeats": args.repeats, "summary": summary, "runs": runs,
        }, indent=1))
    return 0


def _measure(edit: Callable[[ModelAdapter, str, Path], EditResult], model: ModelAdapter, policy: str,
             trace: Path) -> dict[str, object]:
    """One edit pair; a typed error the client raised is recorded, not hidden."""
    try:
        result = edit(model, policy, trace)
    except SakuraError as exc:
        return {"error": f"{type(exc).__name__}: {exc}", "load_1min": os.getloadavg()[0]}
    return {"stall_s": result.timeline.stall_s, "latency_s": result.latency_s, "bytes": result.bytes,
            "levels": list(result.levels), "load_1min": os.getloadavg()[0]}


def _line(row: dict[str, object]) -> str:
    if "error" in row:
        return f"failed: {row['error']}"
    return (f"stall {row['stall_s']:.3f} s  latency {row['latency_s']:.3f} s  {row['bytes'] / 1e3:7.1f} kB  "
            f"{' '.join(row['levels'])}  (load {row['load_1min']:.1f})")


def _summary(runs: list[dict[str, dict[str, object]]]) -> dict[str, object]:
    """Per policy the stall's spread over the edits that completed and how many failed; and in how
    many repeats where both completed ``mpc`` stalled less than ``fixed-full`` (what the tests assert)."""
    out: dict[str, object] = {}
    for policy in POLICIES:
        stalls = [r[policy]["stall_s"] for r in runs if "error" not in r[policy]]
        out[policy] = {"completed": len(stalls), "failed": len(runs) - len(stalls),
                       **({f"stall_s_{k}": v for k, v in _spread(stalls).items()} if stalls else {})}
    pairs = [r for r in runs if not any("error" in row for row in r.values())]
    out["mpc_stalls_less"] = sum(r["mpc"]["stall_s"] < r["fixed-full"]["stall_s"] for r in pairs)
    out["pairs_completed"] = len(pairs)
    return out


def _edit_fn(link: str, library: str, stack: ExitStack) -> Callable[[ModelAdapter, str, Path], EditResult]:
    """Start the server ``link`` puts the client in front of; return one measured edit pair."""
    if link == "trace":
        from tests.edge_servers import ApiServer

        api = stack.enter_context(ApiServer(library))
        return lambda model, policy, trace: edit_over_step_down(api.url, model, policy, PacedDevice(LAYER_S), trace)
    import ray
    from ray import serve

    from sakura.serve.local import run_app

    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    stack.callback(ray.shutdown)
    stack.callback(serve.shutdown)
    port = int(run_app(library).rsplit(":", 1)[1])
    return lambda model, policy, trace: kernel_edit_over_step_down(port, model, policy, PacedDevice(LAYER_S), trace)


def _spread(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


if __name__ == "__main__":
    sys.exit(main())
