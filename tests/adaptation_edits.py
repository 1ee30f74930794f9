"""Live edits over a link shaped by a real trace whose bandwidth steps down mid-edit (Lumos 4G
driving: 67 Mbit/s, then 9, then 3): ``bench/adaptation.py`` runs them repeatedly and records the
stalls docs/embedding.md quotes, and the kernel-link Serve test runs them once. Their outcome depends on
this machine's timing, so no test compares their stalls; the simulator's replay of the same trace
(``tests/unit/evaluation/test_adaptation_replay.py``) checks the adaptation itself."""

from __future__ import annotations

from pathlib import Path

from sakura.edge_client import EdgeSession, EditResult, make_policy
from sakura.emulation import KernelLink, PacedDevice, TraceLink
from sakura.emulation.traces import load_trace
from sakura.examples import trace_path
from sakura.platform.images import load_image
from sakura.platform.models import ModelAdapter

#: The bundled copy of a real 4G trace (sources in sakura/examples/traces/README.md).
TRACE = trace_path("4g_trace_driving_50174_dr")
WARM_AT, STEP_AT = 44.0, 53.8  # ~36 Mbit/s to learn the link; 0.2 s before the drop
LAYER_S = 0.08  # the emulated phone's compute between two shards
RTT_S = 0.03
PHOTO, TEMPLATE = "skimage:coffee", "portrait"


def edit_over_step_down(
    url: str, model: ModelAdapter, policy: str, device: PacedDevice, trace_path: Path = TRACE
) -> EditResult:
    """One edit at ``fixed-full`` from ``WARM_AT`` (the client learns link and device), then the
    edit under test with ``policy`` from ``STEP_AT``, on an in-process ``TraceLink``."""
    trace = load_trace(trace_path)
    link = TraceLink(trace, rtt_s=RTT_S, offset_s=WARM_AT)
    with EdgeSession(url, link=link, device=device, models=lambda _: model) as session:
        session.edit(load_image(PHOTO), TEMPLATE, 1, "fixed-full")
        link.offset_s = STEP_AT
        link.start()
        oracle_args = {"trace": trace, "trace_time": lambda t: STEP_AT + t} if policy == "oracle" else {}
        chosen = make_policy(policy, **oracle_args)
        return session.edit(load_image(PHOTO), TEMPLATE, 1, chosen)


def kernel_edit_over_step_down(port: int, model: ModelAdapter, policy: str, device: PacedDevice,
                               trace_path: Path = TRACE) -> EditResult:
    """The same two edits through a ``KernelLink`` (netns + veth + tbf) in front of 127.0.0.1:``port``."""
    with KernelLink(load_trace(trace_path), ("127.0.0.1", port), rtt_s=RTT_S, offset_s=WARM_AT) as link:
        session = EdgeSession(link.url, models=lambda _: model, device=device)
        try:
            link.call(session.edit, load_image(PHOTO), TEMPLATE, 1, "fixed-full")
            link.offset_s = STEP_AT
            return link.call(session.edit, load_image(PHOTO), TEMPLATE, 1, policy)
        finally:
            session.close()
