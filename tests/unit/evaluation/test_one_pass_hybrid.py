"""The hybrid on a model that keeps its template KV (one pass of the reference tokens): a prefix
left to the phone is re-judged as the model computes it, so a plan made in a surprise does not
keep the link idle for the rest of the pass."""

from __future__ import annotations

from importlib import resources

import numpy as np

from sakura.edge_client.late_download import LATE_CHECK_S, TRUST
from sakura.edge_client.timeline import Timeline
from sakura.emulation.traces import BandwidthTrace, load_trace
from sakura.evaluation.geometry import EditGeometry, ManifestWire
from sakura.evaluation.profiles import device_profile
from sakura.evaluation.simulator import EditSimulator
from sakura.evaluation.workloads import CodecRates, analytic_geometry, workload_spec
from tests.unit.evaluation.test_per_step_hybrid import CACHEGEN, LEVELS, SIZE


def _geometry(workload: str, profile: str) -> EditGeometry:
    """``workload`` on ``profile`` at the test's codec rates."""
    rates = CodecRates("test", SIZE, {lv: 1e-9 for lv in SIZE}, ManifestWire(1500.0, 150.0, 1400.0, 40.0), "full")
    return analytic_geometry(workload_spec(workload), device_profile(profile), rates, LEVELS, CACHEGEN)


def _on_a_step(workload: str, profile: str, *, step_at: float,
               mbps: tuple[float, float]) -> tuple[Timeline, Timeline, str]:
    """An edit from 10 s into a link at ``mbps[0]`` Mbit/s that drops to ``mbps[1]`` at ``step_at``:
    SAKURA's, the phone alone's, and which of SAKURA's shards it computed (``c``) or fetched (``f``)."""
    trace = BandwidthTrace("step", "test", np.array([0.0, step_at]), np.array(mbps), 600.0)
    sim = EditSimulator(_geometry(workload, profile), trace, 10.0, rtt_s=0.055)
    sakura, alone = sim.run("sakura"), sim.run("on-device-prepared")
    return sakura, alone, "".join("c" if s.computed else "f" for s in sakura.shards)


def test_a_prefix_planned_in_a_surprise_is_taken_back_as_the_model_runs():
    """klein 4B with a 1024 px reference (25 blocks, one pass) on the flagship GPU over a real 5G
    drive from its start (the bundled ``5g_trace_88_driving``): the phone's last three seconds
    (the trace's end) ran about forty times as fast as its preamble, the estimate collapses and
    the policy leaves the pass to the phone. Judged once, when the top of the pass was on its way,
    the phone computed 23 blocks with the link idle and ended behind the phone computing alone
    (76.6 s against 74.7). Re-judged after each block, the top is taken back once the surprise
    has faded: the phone computes fewer than half the blocks and ends ahead of computing alone."""
    g = _geometry("klein-4b-ref1024", "flagship-gpu")
    assert g.kv_cached
    trace = load_trace(resources.files("sakura.examples") / "traces" / "5g_trace_88_driving")
    sim = EditSimulator(g, trace, 0.0, rtt_s=0.055)
    sakura, alone = sim.run("sakura"), sim.run("on-device-prepared")
    computed = [s.index for s in sakura.shards if s.computed]
    assert computed and any(s.taken_back for s in sakura.shards), sakura.levels
    assert len(computed) < g.shards // 2, sakura.levels
    assert sakura.compute_end < alone.compute_end


def test_a_link_that_slows_after_the_model_took_the_fetched_blocks_leaves_the_phone_climbing():
    """klein 4B with a 1024 px reference on the flagship GPU, the link at 25 Mbit/s, then 5 from 18 s
    in: the phone computes the first ten blocks and the link brings the rest, and the model has
    taken fetched blocks well past the phone's prefix when the link slows. Computing the next shard
    then meant running every block from the prefix's top first, so the model waited for each slow
    download (108 s, the phone alone 75 s). While it waits, the phone now runs its pass on through
    the blocks the model took (``late_download.climbs``), computes the last shards itself, and ends
    within a few blocks of the phone alone (80 s)."""
    sakura, alone, sources = _on_a_step("klein-4b-ref1024", "flagship-gpu", step_at=28.0, mbps=(25.0, 5.0))
    assert "fc" in sources, sources  # shards computed above fetched ones: the phone ran through them
    assert sakura.compute_end < 1.1 * alone.compute_end, (sakura.compute_end, alone.compute_end)


def test_a_pass_fetched_whole_is_started_once_the_link_slows_so_far_that_computing_it_all_is_sooner():
    """klein 4B with a 512 px reference on the flagship NPU (a block costs 16 ms), the link at 1 Gbit/s,
    then 50 Mbit/s half a second in: the hybrid plans the whole pass fetched, and each shard then
    takes over 0.2 s to come. The phone, never having started the pass, idled through every wait
    (5.3 s, the phone alone 3.1 s). It now starts the pass while the model waits, runs it through
    the blocks the model took, computes the rest itself and ends within 15% of the phone alone."""
    sakura, alone, sources = _on_a_step("klein-4b-ref512", "flagship-npu", step_at=10.5, mbps=(1000.0, 50.0))
    assert sources.startswith("f") and "fc" in sources, sources  # the pass was fetched whole at first
    assert sakura.compute_end < 1.15 * alone.compute_end, (sakura.compute_end, alone.compute_end)


def test_a_phone_computing_past_a_stalled_link_waits_what_the_rule_says_not_a_poll():
    """The same edit, the link down to 5 Mbit/s: past the first shard it computes, the phone waits
    for each late download ``TRUST`` of a block (16 ms on this NPU), as the late-download rule says,
    and not a poll of the compute stage (``LATE_CHECK_S``, 50 ms), which the rule's waits are
    shorter than here: 50 ms a block made the edit 0.14 s longer."""
    sakura, _, sources = _on_a_step("klein-4b-ref512", "flagship-npu", step_at=10.5, mbps=(1000.0, 5.0))
    first = sources.index("c")
    assert "f" not in sources[first:], sources
    block_s = max(_geometry("klein-4b-ref512", "flagship-npu").shard_compute_s)
    waits = [stall.end - stall.start for stall in sakura.stalls if stall.shard > first]
    assert waits, sakura.stalls  # the downloads in flight still promised to come
    assert max(waits) <= TRUST * block_s + 1e-6 < LATE_CHECK_S
