"""End-to-end evaluation: named workloads (measured edit geometry, or a real architecture's FLOPs
and KV bytes), device profiles with sources, the CacheGen baseline codec and rule, fidelity of
level plans, the trace-driven simulator and the regime map (used by ``bench/e2e.py``,
``bench/regime.py`` and the demo). Imports the edge client's policies so the simulator runs the
real policy code; never ray."""

from sakura.evaluation.architectures import ARCHITECTURES, EditFlops, edit_flops
from sakura.evaluation.cachegen import CACHEGEN_LEVELS, CacheGenStyle, select_config
from sakura.evaluation.fidelity import IDENTICAL_DB, FidelityTable, psnr_db
from sakura.evaluation.geometry import TOKEN_RATIOS, EditGeometry, ManifestWire, measure_geometry
from sakura.evaluation.oracle import OraclePolicy, oracle_policy
from sakura.evaluation.profiles import PROFILES, DeviceProfile, device_profile
from sakura.evaluation.regime import RegimeCurve, regime_curve
from sakura.evaluation.runs import Run, simulate_runs, summarize
from sakura.evaluation.simulator import SYSTEMS, EditSimulator
from sakura.evaluation.workloads import WORKLOADS, CodecRates, analytic_geometry, measure_workload, workload_spec

__all__ = [
    "ARCHITECTURES",
    "CACHEGEN_LEVELS",
    "IDENTICAL_DB",
    "PROFILES",
    "SYSTEMS",
    "TOKEN_RATIOS",
    "WORKLOADS",
    "CacheGenStyle",
    "CodecRates",
    "ManifestWire",
    "DeviceProfile",
    "EditFlops",
    "EditGeometry",
    "EditSimulator",
    "FidelityTable",
    "OraclePolicy",
    "RegimeCurve",
    "Run",
    "analytic_geometry",
    "device_profile",
    "edit_flops",
    "measure_geometry",
    "measure_workload",
    "oracle_policy",
    "psnr_db",
    "regime_curve",
    "select_config",
    "simulate_runs",
    "summarize",
    "workload_spec",
]
