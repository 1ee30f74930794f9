"""Device profiles: how much slower (>1) or faster (<1) than the measuring machine a phone
computes. The simulator multiplies every measured compute and decode time by the factor.

The factors are ratios of Geekbench 6 multi-core CPU scores (the model runs on the CPU with
torch here): this machine, a 2-vCPU AMD EPYC VM, is taken as about 2,300 (an estimate for two
Zen 3 vCPUs: no Geekbench run was possible here); Snapdragon 8 Elite (2025 flagships such as the
Galaxy S25) scores 9,932 (Geekbench 6.4 results as reported by shiftdelete.net, 2025); the
Snapdragon 778G (2021-22 mid-range, e.g. Galaxy A52s) about 2,830 (Geekbench 5 multi-core
average on nanoreview.net; its Geekbench 6 score is similar). They are rough: a phone running
the model on its GPU or NPU would be faster still, and sustained runs throttle.
"""

from __future__ import annotations

from dataclasses import dataclass

THIS_MACHINE_GB6 = 2300.0


@dataclass(frozen=True)
class DeviceProfile:
    name: str
    compute_factor: float
    description: str


PROFILES: dict[str, DeviceProfile] = {
    "this-machine": DeviceProfile("this-machine", 1.0, "the 2-vCPU AMD EPYC VM the figures were measured on"),
    "flagship-2025": DeviceProfile("flagship-2025", THIS_MACHINE_GB6 / 9932,
                                   "Snapdragon 8 Elite phone (Geekbench 6 multi-core 9,932)"),
    "midrange-2022": DeviceProfile("midrange-2022", THIS_MACHINE_GB6 / 2830,
                                   "three-year-old mid-range phone, Snapdragon 778G (multi-core ~2,830)"),
}


def device_profile(name: str) -> DeviceProfile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown device profile {name!r}; known: {sorted(PROFILES)}") from None
