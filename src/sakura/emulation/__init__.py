"""Link emulation for tests and benchmarks, driven by real bandwidth traces.

:class:`TraceLink` paces the transport in process (deterministic, no privileges);
:class:`KernelLink` shapes a real veth pair with ``tbf`` in a network namespace (root only).
"""

from sakura.emulation.kernel_link import KernelLink, KernelLinkUnavailable, kernel_link_support
from sakura.emulation.slow_device import PacedDevice, SlowDevice
from sakura.emulation.trace_link import TraceLink

__all__ = ["KernelLink", "KernelLinkUnavailable", "PacedDevice", "SlowDevice", "TraceLink", "kernel_link_support"]
