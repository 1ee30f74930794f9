"""Bandwidth adaptation on a link shaped by a real trace whose bandwidth steps down mid-edit
(Lumos 4G driving: 67 Mbit/s, then 9, then 3). ``bench/adaptation.py`` runs these same edits
repeatedly and records the stalls the README quotes."""

from __future__ import annotations

from pathlib import Path

from sakura.edge_client import EdgeSession, EditResult, make_policy
from sakura.emulation import KernelLink, PacedDevice, TraceLink
from sakura.emulation.traces import BandwidthTrace, load_trace
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


def test_policy_moves_later_shards_smaller_and_stalls_less_than_fixed_full(api, reference_model):
    device = PacedDevice(LAYER_S)
    full = edit_over_step_down(api.url, reference_model, "fixed-full", device)
    mpc = edit_over_step_down(api.url, reference_model, "mpc", device)
    rank = {"compact": 0, "medium": 1, "full": 2}
    assert full.timeline.stall_s > 0.2  # the drop hurts a client that does not adapt
    early, late = [rank[lv] for lv in mpc.levels[:3]], [rank[lv] for lv in mpc.levels[3:]]
    assert max(early) == 2 and min(late) < 2, mpc.levels  # full while it was fast, smaller after the drop
    assert mpc.timeline.stall_s < full.timeline.stall_s / 2
    assert mpc.bytes < full.bytes


def test_a_fresh_session_keeps_the_link_busy_from_its_first_shard_on(api, reference_model):
    """No rate known yet: the second request leaves when the first response's first byte arrives, so
    the second response follows the first without a round trip of idle link."""
    rtt = 0.1  # long enough that scheduling noise on a busy machine cannot pass for it
    link = TraceLink(BandwidthTrace.constant(0.3), rtt_s=rtt)  # 12-18 kB shards: 0.3-0.5 s each
    with EdgeSession(api.url, link=link, models=lambda _: reference_model) as session:
        link.start()
        shards = session.edit(load_image(PHOTO), TEMPLATE, 1, "fixed-medium").timeline.shards
    assert shards[1].requested_at < shards[0].arrived_at - rtt
    assert shards[1].first_byte_at - shards[0].arrived_at < rtt / 2
