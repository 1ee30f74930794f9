"""The edge client against a real Ray Serve instance reading a library from a real S3 server:
exact output at full, redirect mode, and adaptation on a kernel-shaped link."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sakura.edge_client import EdgeSession
from sakura.edge_client.emulation import KernelLink, kernel_link_support
from sakura.platform.images import load_image
from sakura.platform.models import load_model
from sakura.platform.traces import load_trace
from tests.helpers import exact_edit, make_library
from tests.integration.conftest import serve_apps

TRACE = Path(__file__).resolve().parents[4] / "shared" / "traces" / "lumos-4g" / "4g_trace_driving_50174_dr"
TEMPLATE_IMAGE, PHOTO = "skimage:astronaut", "skimage:coffee"


@pytest.fixture(scope="module")
def model():
    return load_model("reference")


@pytest.fixture(scope="module")
def service(ray_cluster, s3_server):
    uri = f"s3://{s3_server.new_bucket()}/lib?endpoint={s3_server.endpoint}"
    make_library(uri, [TEMPLATE_IMAGE], template_id="portrait", model="reference", steps=4)
    with serve_apps({"/": {"store": uri}, "/redirect": {"store": uri, "mode": "redirect"}}) as base:
        yield base, int(base.rsplit(":", 1)[1])


@pytest.mark.parametrize("prefix", ["", "/redirect"])
def test_edit_through_serve_equals_the_exact_kv_output_at_full(service, model, prefix):
    base, _ = service
    with EdgeSession(base + prefix, models=lambda _: model) as session:
        result = session.edit(load_image(PHOTO), "portrait", policy="fixed-full", seed=1)
    assert result.levels == ["full"] * 6
    np.testing.assert_array_equal(result.image, exact_edit(model, TEMPLATE_IMAGE, PHOTO, seed=1))


@pytest.mark.skipif(not TRACE.exists(), reason="needs ../shared/traces")
def test_adaptation_on_a_kernel_shaped_link(service, model):
    ok, why = kernel_link_support()
    if not ok:
        pytest.skip(f"kernel link emulation unavailable here: {why}")
    from sakura.edge_client.emulation import PacedDevice
    from tests.unit.edge_client.test_adaptation import LAYER_S, STEP_AT, WARM_AT

    _, port = service
    device, results = PacedDevice(LAYER_S), {}
    for policy in ("fixed-full", "mpc"):
        with KernelLink(load_trace(TRACE), ("127.0.0.1", port), rtt_s=0.03, offset_s=WARM_AT) as link:
            session = EdgeSession(link.url, models=lambda _: model, device=device)
            link.call(session.edit, load_image(PHOTO), "portrait", 1, "fixed-full")
            link.offset_s = STEP_AT
            results[policy] = link.call(session.edit, load_image(PHOTO), "portrait", 1, policy)
            session.close()
    full, mpc = results["fixed-full"], results["mpc"]
    assert full.timeline.stall_s > 0.2
    assert "full" in mpc.levels[:3] and min(mpc.levels[3:], key=["compact", "medium", "full"].index) != "full", mpc.levels
    assert mpc.timeline.stall_s < full.timeline.stall_s  # real TCP over tbf: noisier than the in-process link
