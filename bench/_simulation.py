"""What the simulation benches over workloads share (``bench/energy.py``, ``bench/session.py``):
their common options, the reference model's measured templates, and a workload's edits on its
default device profile."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from sakura.evaluation.geometry import EditGeometry
from sakura.evaluation.profiles import DEFAULT_ANALYTIC_PROFILE, DeviceProfile, device_profile
from sakura.evaluation.workloads import (
    Analytic,
    MeasuredWorkload,
    measure_workload,
    workload_geometries,
    workload_spec,
)


def parser(doc: str | None, default_workloads: tuple[str, ...]) -> argparse.ArgumentParser:
    """--traces, --json, --plots, --workload, --rtt-ms, --server-ms and --repeats."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--traces", default=str(Path(__file__).resolve().parents[2] / "shared" / "traces"))
    p.add_argument("--json", type=Path)
    p.add_argument("--plots", type=Path)
    p.add_argument("--workload", action="append", help=f"repeatable (default: {', '.join(default_workloads)})")
    p.add_argument("--rtt-ms", type=float, default=40.0, help="network round trip per request")
    p.add_argument("--server-ms", type=float, default=15.0, help="server time to first byte (bench/e2e_live.py)")
    p.add_argument("--repeats", type=int, default=3, help="timed repetitions per compute measurement")
    return p


def rtt_s(args: argparse.Namespace) -> float:
    return (args.rtt_ms + args.server_ms) / 1000


def reference_workload(repeats: int) -> MeasuredWorkload:
    """The reference model's example templates, built in a scratch library and measured here."""
    with tempfile.TemporaryDirectory(prefix="sakura-bench-") as workdir:
        print("building and measuring the reference model's example templates ...", flush=True)
        return measure_workload("reference", f"file://{workdir}/lib", repeats=repeats, ratios=(1,))


def edits_of(name: str, reference: MeasuredWorkload) -> tuple[DeviceProfile, list[EditGeometry]]:
    """Workload ``name`` on its default profile (analytic: the default analytic one; measured: this machine)."""
    spec = workload_spec(name)
    profile = device_profile(DEFAULT_ANALYTIC_PROFILE if isinstance(spec, Analytic) else "this-machine")
    return profile, workload_geometries(spec, profile, reference)
