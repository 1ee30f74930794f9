"""Bandwidth adaptation on the bundled real 4G trace whose bandwidth steps down mid-edit (Lumos 4G
driving: 67 Mbit/s, then 9, then 3), replayed by the simulator with the edge client's own policies:
the claim ``bench/adaptation.py``'s live edits (``tests/adaptation_edits.py``) measure, without timing this
machine. The reference model's measured shard bytes; its compute fixed at the emulated phone's
``LAYER_S`` a layer and decode at a fixed cost a byte (an estimate), so the outcome follows from the
trace alone. ``bench/adaptation.py`` measures the live stalls docs/embedding.md quotes."""

from __future__ import annotations

from dataclasses import replace

from sakura.edge_client import make_policy
from sakura.emulation.traces import load_trace
from sakura.evaluation import EditSimulator
from sakura.examples import trace_path

TRACE = trace_path("4g_trace_driving_50174_dr")
#: 0.1 s before the drop, so that it falls during the edit's downloads (the live edits start 0.2 s
#: before it: their requests, Python's share included, leave later than the simulator's)
STEP_AT = 53.9
LAYER_S, RTT_S = 0.08, 0.03
DECODE_S_PER_BYTE = 2e-8  # about 50 MB/s: an estimate, far from the link's part


def test_the_policy_moves_later_shards_smaller_and_stalls_less_than_fixed_full(measured):
    _, measured_g, _ = measured
    n = measured_g.shards
    g = replace(measured_g, startup_s=LAYER_S, gaps_s=[LAYER_S] * n,
                decode_s={lv: [size * DECODE_S_PER_BYTE for size in sizes] for lv, sizes in measured_g.sizes.items()})
    sim = EditSimulator(g, load_trace(TRACE), STEP_AT, rtt_s=RTT_S, warm_template=True)
    full, mpc = sim.pipelined(make_policy("fixed-full"), "full"), sim.pipelined(make_policy("mpc"), "mpc")
    rank = {"compact": 0, "medium": 1, "full": 2}
    # stall_s: seconds of the simulator's virtual time on the trace, not of this machine
    assert full.stall_s > 0.2  # the drop hurts a client that does not adapt
    early, late = [rank[lv] for lv in mpc.levels[:3]], [rank[lv] for lv in mpc.levels[3:]]
    assert max(early) == 2 and min(late) < 2, mpc.levels  # full while it was fast, smaller after the drop
    assert mpc.stall_s < full.stall_s / 2
    assert mpc.network_bytes < full.network_bytes
