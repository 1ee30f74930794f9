"""The hybrid on a per-step model (a KV per step and block) behind the live pipeline's bounded stage
queues: what it plans is what the pipeline can do, so it never trails the phone computing alone
(on a phone that can compute the template KV; today's per-step adapters cannot, and there the
simulated hybrid fetches, as the live client does)."""

from __future__ import annotations

import pytest

from sakura.emulation.traces import BandwidthTrace
from sakura.evaluation.geometry import ManifestWire
from sakura.evaluation.profiles import device_profile
from sakura.evaluation.simulator import EditSimulator
from sakura.evaluation.workloads import CodecRates, analytic_geometry, workload_spec

LEVELS, CACHEGEN = ["compact", "medium", "full"], ["cachegen-low", "cachegen-coarse", "cachegen-fine"]
#: Bytes per level over fp16: about codec v2's on a model that compresses poorly (an estimate).
SIZE = {"compact": 0.11, "medium": 0.3, "full": 0.8, "cachegen-low": 0.2, "cachegen-coarse": 0.3,
        "cachegen-fine": 0.45}


def _kontext(phone_computes: bool | None):
    rates = CodecRates("test", SIZE, {lv: 1e-9 for lv in SIZE}, ManifestWire(1500.0, 150.0, 1400.0, 40.0), "full")
    g = analytic_geometry(workload_spec("analytic:kontext@512/512/3"), device_profile("flagship-npu"), rates,
                          LEVELS, CACHEGEN, phone_computes=phone_computes)
    assert not g.kv_cached and g.steps == 3
    return g


@pytest.fixture(scope="module")
def kontext():
    """Kontext on a phone that can compute its template KV (a per-step adapter that could)."""
    return _kontext(phone_computes=True)


def test_where_the_client_cannot_compute_the_simulated_hybrid_fetches_as_the_live_one_does():
    """Kontext's adapter cannot compute template KV on the phone (``computes_template``), so the live
    client fetches every block; the simulated one once computed most of them on a slow link and was
    compared with live edits it did not resemble (``bench/out/e2e_live-bench-flux.json``)."""
    g = _kontext(phone_computes=None)
    assert g.shard_compute_s == []
    sim = EditSimulator(g, BandwidthTrace.constant(20, duration=1e6), 0.0, rtt_s=0.055)
    sakura, fetching = sim.run("sakura"), sim.run("sakura-fetch-only")
    assert "compute" not in sakura.levels
    assert sakura.compute_end <= fetching.compute_end * 1.01  # its preamble differs (no hashes object)


@pytest.mark.parametrize("mbps", [60, 90, 130, 180, 250, 360])
def test_the_hybrid_never_trails_the_phone_computing_alone(kontext, mbps):
    """On constant links from where fetching starts to pay: before the planner knew the queues, it
    planned the fetched tail of each step as if the link could run ahead of the model and stalled
    (0.78 of the phone alone on kontext-ref512 at 89-126 Mbit/s); nor does it trail fetching every
    block (re-planned at each block, a lag tied to the split once made it compute one more block
    each time)."""
    sim = EditSimulator(kontext, BandwidthTrace.constant(mbps, duration=1e6), 0.0, rtt_s=0.055)
    sakura = sim.run("sakura").compute_end
    alone, fetching = sim.run("on-device-prepared").compute_end, sim.run("sakura-fetch-only").compute_end
    assert sakura <= min(alone, fetching) * 1.01
