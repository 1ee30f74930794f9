"""What the simulation benches over workloads share (``bench/energy.py``, ``bench/session.py``,
``bench/regime.py``, ``bench/e2e.py``): their common options, the reference model's measured
templates, the codec rates analytic workloads take, and a workload's edits on its default device
profile."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from _args import bench_parser

from sakura.evaluation.geometry import EditGeometry
from sakura.evaluation.profiles import DEFAULT_ANALYTIC_PROFILE, DeviceProfile, device_profile
from sakura.evaluation.workloads import (
    Analytic,
    CodecRates,
    MeasuredWorkload,
    largest_shards,
    least_compressible,
    measure_workload,
    workload_geometries,
    workload_spec,
)
from sakura.platform.codec import DEFAULT_LEVELS, V1_LEVELS, LevelSpec

OUT = Path(__file__).resolve().parent / "out"
#: The evaluation modules a simulated figure depends on: all but the pictures and the studies
#: beyond the paper (energy, thermal, sustained sessions, the catalogue), which no such figure uses.
_EVALUATION = tuple(f"sakura.evaluation.{m}" for m in (
    "architectures", "block_costs", "cachegen", "calibration", "fidelity", "flops", "geometry", "oracle",
    "profiles", "regime", "runs", "sequential", "sim_estimator", "sim_link", "sim_model", "simulator", "stages",
    "workload", "workloads"))
#: The code a simulated figure depends on (its provenance digest covers these).
SIMULATED = (*_EVALUATION, "sakura.edge_client.fetch_loop", "sakura.edge_client.late_download",
             "sakura.edge_client.planning",
             "sakura.edge_client.policy", "sakura.edge_client.estimator", "sakura.emulation.traces",
             "sakura.platform.codec", "sakura.platform.models.factored_cost")


def parser(doc: str | None, default_workloads: tuple[str, ...]) -> argparse.ArgumentParser:
    """--traces, --json, --plots, --workload, --rtt-ms, --server-ms and --repeats."""
    p = bench_parser(doc)
    p.add_argument("--traces", default=str(Path(__file__).resolve().parents[2] / "shared" / "traces"))
    p.add_argument("--plots", type=Path)
    p.add_argument("--workload", action="append", help=f"repeatable (default: {', '.join(default_workloads)})")
    p.add_argument("--rtt-ms", type=float, default=40.0, help="network round trip per request")
    p.add_argument("--server-ms", type=float, default=15.0, help="server time to first byte (bench/e2e_live.py)")
    p.add_argument("--repeats", type=int, default=3, help="timed repetitions per compute measurement")
    add_rates_options(p)
    return p


def add_rates_options(p: argparse.ArgumentParser) -> None:
    """--codec, --rates and --codec-bench: SAKURA's levels, and where analytic workloads' bytes per
    level and decode cost come from."""
    p.add_argument("--codec", choices=("v2", "v1"), default="v2",
                   help="SAKURA's levels: the build's (v2, transform) or the v1 class levels they replaced")
    p.add_argument("--rates", choices=("conservative", "reference"), default="conservative",
                   help="analytic workloads' codec: the least compressible model a codec bench measured "
                        "(conservative, the default) or the reference model's KV (the optimistic bracket)")
    p.add_argument("--codec-bench", type=Path, action="append",
                   help="codec bench JSONs the conservative rates pick from (default: bench/out/codec-*.json)")


def levels(args: argparse.Namespace) -> tuple[LevelSpec, ...] | None:
    """The levels measured workloads are built at (None: the build's own)."""
    return V1_LEVELS if args.codec == "v1" else None


def analytic_rates(args: argparse.Namespace, reference: MeasuredWorkload) -> tuple[CodecRates, dict]:
    """The codec rates ``args`` ask for, and what they are (bracket, model, source) for the JSON. The
    conservative model is the least compressible at the build's levels, whichever ``--codec``; in
    either bracket the decode cost per byte is the one measured on the largest shards."""
    paths = args.codec_bench or sorted(OUT.glob("codec-*.json"))
    reports = {str(path): json.loads(path.read_text()) for path in paths}
    lossy = [lv.name for lv in DEFAULT_LEVELS if not lv.lossless]
    methods = {name: f"{name}-v1" for name in lossy} if args.codec == "v1" else None
    needed = list(methods.values()) if methods else lossy
    decoder = largest_shards(list(reports.values()), needed)
    decode = {"decode_model": decoder["model"], "decode_source": _name(reports, decoder),
              "decode_digest": _digest(decoder)}
    rates, context = _context_rates(CodecRates.from_geometries(reference.geometries), args)
    if args.rates == "reference":
        return rates.with_decode_from(decoder, methods), {
            "bracket": "optimistic", "model": "reference", "source": "measured here", "codec": args.codec,
            **decode, **context}
    chosen = least_compressible(list(reports.values()), lossy)
    described = {"bracket": "conservative", "model": chosen["model"], "blocks": chosen.get("blocks"),
                 "source": _name(reports, chosen), "codec_digest": _digest(chosen), "codec": args.codec,
                 **decode, **context}
    return rates.with_codec_bench(chosen, methods, decode_from=decoder), described


def _context_rates(rates: CodecRates, args: argparse.Namespace) -> tuple[CodecRates, dict]:
    """Context objects coded as ``bench/out/context-objects.json`` measured them (the v2 codec only):
    the optimistic bracket each family as its own tiny pipeline, the conservative every family as the
    least compressible one."""
    path = OUT / "context-objects.json"
    if args.codec == "v1" or not path.exists():
        return rates, {"context": "uncoded"}
    report = json.loads(path.read_text())
    rates = rates.with_context_bench(report, own_family=args.rates == "reference")
    return rates, {"context": path.name, "context_digest": _digest(report), "context_ratio": rates.context_ratio}


def _name(reports: dict[str, dict], report: dict) -> str:
    return Path(next(path for path, r in reports.items() if r is report)).name


def _digest(report: dict) -> str | None:
    return report.get("provenance", {}).get("code_digest")


def rtt_s(args: argparse.Namespace) -> float:
    return (args.rtt_ms + args.server_ms) / 1000


def reference_workload(repeats: int) -> MeasuredWorkload:
    """The reference model's example templates, built in a scratch library and measured here."""
    with tempfile.TemporaryDirectory(prefix="sakura-bench-") as workdir:
        print("building and measuring the reference model's example templates ...", flush=True)
        return measure_workload("reference", f"file://{workdir}/lib", repeats=repeats, ratios=(1,))


def edits_of(name: str, reference: MeasuredWorkload,
             rates: tuple[CodecRates, dict]) -> tuple[DeviceProfile, list[EditGeometry], dict | None]:
    """Workload ``name`` on its default profile (analytic: the default analytic one, at ``rates``,
    what :func:`analytic_rates` gave, as every simulated figure takes them; measured: this
    machine), and where its codec rates came from (None: measured)."""
    spec = workload_spec(name)
    if not isinstance(spec, Analytic):
        profile = device_profile("this-machine")
        return profile, workload_geometries(spec, profile, reference), None
    profile = device_profile(DEFAULT_ANALYTIC_PROFILE)
    return profile, workload_geometries(spec, profile, reference, rates[0]), rates[1]
