"""The hybrid on a model that keeps its template KV (one pass of the reference tokens): a prefix
left to the phone is re-judged as the model computes it, so a plan made in a surprise does not
keep the link idle for the rest of the pass."""

from __future__ import annotations

from importlib import resources

from sakura.emulation.traces import load_trace
from sakura.evaluation.geometry import ManifestWire
from sakura.evaluation.profiles import device_profile
from sakura.evaluation.simulator import EditSimulator
from sakura.evaluation.workloads import CodecRates, analytic_geometry, workload_spec
from tests.unit.evaluation.test_per_step_hybrid import CACHEGEN, LEVELS, SIZE


def test_a_prefix_planned_in_a_surprise_is_taken_back_as_the_model_runs():
    """klein 4B with a 1024 px reference (25 blocks, one pass) on the flagship GPU over a real 5G
    drive from its start (the bundled ``5g_trace_88_driving``): the phone's last three seconds
    (the trace's end) ran about forty times as fast as its preamble, the estimate collapses and
    the policy leaves the pass to the phone. Judged once, when the top of the pass was on its way,
    the phone computed 23 blocks with the link idle and ended behind the phone computing alone
    (76.6 s against 74.7). Re-judged after each block, the top is taken back once the surprise
    has faded: the phone computes fewer than half the blocks and ends ahead of computing alone."""
    rates = CodecRates("test", SIZE, {lv: 1e-9 for lv in SIZE}, ManifestWire(1500.0, 150.0, 1400.0, 40.0), "full")
    g = analytic_geometry(workload_spec("klein-4b-ref1024"), device_profile("flagship-gpu"), rates, LEVELS, CACHEGEN)
    assert g.kv_cached
    trace = load_trace(resources.files("sakura.examples") / "traces" / "5g_trace_88_driving")
    sim = EditSimulator(g, trace, 0.0, rtt_s=0.055)
    sakura, alone = sim.run("sakura"), sim.run("on-device-prepared")
    computed = [s.index for s in sakura.shards if s.computed]
    assert computed and any(s.taken_back for s in sakura.shards), sakura.levels
    assert len(computed) < g.shards // 2, sakura.levels
    assert sakura.compute_end < alone.compute_end
