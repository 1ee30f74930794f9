"""Link emulation for tests and benchmarks, driven by real bandwidth traces.

:class:`TraceLink` paces the transport in process (deterministic, no privileges);
:class:`KernelLink` shapes a real veth pair with ``tbf`` in a network namespace (root only).
:class:`WorkloadPacing` paces a small model's phone and link as a real workload's (``sakura demo``).
"""

from sakura.emulation.kernel_link import KernelLink, KernelLinkUnavailable, kernel_link_support
from sakura.emulation.pacing import WorkloadPacing, rate_scale, scale_trace
from sakura.emulation.slow_device import PacedDevice, PacedEditDevice, SlowDevice
from sakura.emulation.trace_link import TraceLink

__all__ = ["KernelLink", "KernelLinkUnavailable", "PacedDevice", "PacedEditDevice", "SlowDevice", "TraceLink",
           "WorkloadPacing", "kernel_link_support", "rate_scale", "scale_trace"]
