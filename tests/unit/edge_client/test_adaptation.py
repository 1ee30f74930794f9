"""Bandwidth adaptation on a link shaped by a real trace whose bandwidth steps down mid-edit
(Lumos 4G driving: 67 Mbit/s, then 9, then 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sakura.edge_client import EdgeSession, make_policy
from sakura.edge_client.emulation import PacedDevice, TraceLink
from sakura.platform.images import load_image
from sakura.platform.traces import load_trace

TRACE = Path(__file__).resolve().parents[4] / "shared" / "traces" / "lumos-4g" / "4g_trace_driving_50174_dr"
WARM_AT, STEP_AT = 44.0, 53.8  # ~36 Mbit/s to learn the link; 0.2 s before the drop
LAYER_S = 0.08  # the emulated phone's compute between two shards


def edit_over_step_down(url: str, model, policy: str, device: PacedDevice):
    trace = load_trace(TRACE)
    link = TraceLink(trace, rtt_s=0.03, offset_s=WARM_AT)
    with EdgeSession(url, link=link, device=device, models=lambda _: model) as session:
        session.edit(load_image("skimage:coffee"), "portrait", 1, "fixed-full")  # learn link and device
        link.offset_s = STEP_AT
        link.start()
        chosen = make_policy(policy, **({"trace": trace, "trace_time": lambda t: STEP_AT + t} if policy == "oracle" else {}))
        return session.edit(load_image("skimage:coffee"), "portrait", 1, chosen)


@pytest.mark.skipif(not TRACE.exists(), reason="needs ../shared/traces")
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
