"""End-to-end evaluation: measured edit geometry, device profiles, the CacheGen baseline codec,
fidelity of level plans and the trace-driven simulator (used by ``bench/e2e.py`` and the demo).
Imports the edge client's policies so the simulator runs the real policy code; never ray."""

from sakura.evaluation.cachegen import CACHEGEN_LEVELS, CacheGenStyle
from sakura.evaluation.fidelity import IDENTICAL_DB, FidelityTable, psnr_db
from sakura.evaluation.geometry import TOKEN_RATIOS, EditGeometry, measure_geometry
from sakura.evaluation.profiles import PROFILES, DeviceProfile, device_profile
from sakura.evaluation.simulator import SYSTEMS, EditSimulator, SimEdit, SimShard

__all__ = [
    "CACHEGEN_LEVELS",
    "IDENTICAL_DB",
    "PROFILES",
    "SYSTEMS",
    "TOKEN_RATIOS",
    "CacheGenStyle",
    "DeviceProfile",
    "EditGeometry",
    "EditSimulator",
    "FidelityTable",
    "SimEdit",
    "SimShard",
    "device_profile",
    "measure_geometry",
    "psnr_db",
]
