"""The end-to-end simulator: invariants on real traces, and the systems' behaviour at the extremes,
on the reference model's geometry as measured once and kept (``pinned_geometry``): the virtual
times it asserts follow from the code, not from how busy this machine is."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from sakura.edge_client.planning import ABANDON_MIN_S
from sakura.emulation.traces import BandwidthTrace, load_traces
from sakura.evaluation import SYSTEMS, EditSimulator
from sakura.evaluation.geometry import EditGeometry
from sakura.evaluation.sim_link import SimulatedLink, arrived

TRACES = Path(__file__).resolve().parents[4] / "shared" / "traces"
ORACLE_GOAL = 1.10  # sakura / oracle, the target of docs/validation.md ("Against the goals")


def steady(mbps: float) -> BandwidthTrace:
    """A link of constant capacity (a test fixture, not a bandwidth experiment)."""
    return BandwidthTrace(f"steady-{mbps}", "test", np.array([0.0]), np.array([mbps]), 600.0)


@pytest.mark.skipif(not TRACES.exists(), reason="needs ../shared/traces")
def test_no_system_beats_the_bound_and_sakura_stays_near_the_oracle(pinned_geometry):
    g = pinned_geometry
    for family, traces in load_traces(TRACES).items():
        trace = traces[0]
        for start in (0.2 * trace.duration, 0.7 * trace.duration):
            sim = EditSimulator(g, trace, start)
            edits = {s: sim.run(s) for s in SYSTEMS}
            bound = sim.bound()
            for system, edit in edits.items():
                fetches_everything = edit.shards and not any(shard.computed for shard in edit.shards)
                if fetches_everything:  # the bound is that of an edit fetching every shard
                    assert edit.latency_s >= bound - 1e-9, (family, system)
            assert edits["sakura"].latency_s <= edits["full-sequential"].latency_s + 1e-9
            # The goal of docs/validation.md, sakura / oracle <= 1.10. Measured 1.000 at every (family, start)
            # here, on a quiet and on a loaded machine; on the same cases sakura-fixed-medium
            # reaches 1.6-1.9 and full-sequential 8-12, so a policy that stops adapting fails this.
            assert edits["sakura"].latency_s <= ORACLE_GOAL * edits["oracle"].latency_s, (family, start)
            for edit in edits.values():
                assert edit.stall_s >= 0 and all(s.consumed_at >= s.needed_at - 1e-12 for s in edit.shards)


def test_fast_link_full_everywhere_and_latency_close_to_compute(pinned_geometry):
    g = pinned_geometry
    sim = EditSimulator(g, steady(5000.0), 10.0, rtt_s=0.01)
    edit = sim.run("sakura-fetch-only")
    assert set(edit.levels) == {"full"}
    assert edit.latency_s < sim.preamble_done() + g.compute_s + 0.05
    ondevice = sim.run("on-device")
    assert ondevice.latency_s == pytest.approx(sim.fetched(0.0, g.source_bytes) + g.ondevice_compute_s("on-device"))
    assert ondevice.shards == []


def test_slow_link_smallest_levels(pinned_geometry):
    g = pinned_geometry
    sim = EditSimulator(g, steady(0.5), 10.0)
    assert set(sim.run("sakura-fetch-only").levels) == {"compact"}
    cachegen = sim.run("cachegen")  # its rule: nothing fits SLO / chunks at 0.5 Mbit/s, so it recomputes
    assert all(shard.computed for shard in cachegen.shards) and cachegen.network_bytes == 0
    assert set(sim.run("sakura-fixed-medium").levels) == {"medium"}
    assert sim.run("full-sequential").latency_s > sim.run("sakura-fetch-only").latency_s * 5


def test_a_download_at_the_smallest_level_is_never_weighed_for_abandoning(pinned_geometry, monkeypatch):
    """A policy abandons a download for a smaller level; below the smallest there is none, so the
    simulated link does not ask (it asked every 20 ms of such a download: on a slow link, a per-step
    model fetching every shard at compact made hours of checks)."""
    from sakura.edge_client import policy as policies

    asked: list[str] = []
    real = policies._Adaptive.abandon

    def spy(self, ctx, level, received, rate):
        asked.append(level)
        return real(self, ctx, level, received, rate)

    monkeypatch.setattr(policies._Adaptive, "abandon", spy)
    edit = EditSimulator(pinned_geometry, steady(0.05), 10.0).run("sakura-fetch-only")
    assert set(edit.levels) == {"compact"} and not edit.shards[0].computed
    assert "compact" not in asked


def test_a_cold_session_starts_small_and_unknown_systems_are_refused(pinned_geometry):
    g = pinned_geometry
    assert EditSimulator(g, steady(1000.0), 1.0, cold=True).run("sakura-fetch-only").levels[0] == "compact"
    with pytest.raises(ValueError):
        EditSimulator(g, steady(1.0), 0.0).run("magic")


def test_a_cold_session_sends_its_second_request_at_the_first_byte_of_the_first(pinned_geometry):
    """Without a rate to time the first response by, the next request leaves at its first byte (as
    the live fetcher does), so the link does not idle a round trip between the first two shards."""
    g = pinned_geometry
    edit = EditSimulator(g, steady(0.2), 1.0, rtt_s=0.05, cold=True).run("sakura-fetch-only")  # a shard > a round trip
    first, second = edit.shards[0], edit.shards[1]
    assert second.requested_at == pytest.approx(first.first_byte_at)
    assert second.first_byte_at == pytest.approx(first.arrived_at)  # bytes follow bytes


def test_the_planner_is_told_the_bytes_still_to_come_not_when_the_link_frees(pinned_geometry, monkeypatch):
    """The live planner knows the bytes still to come of the downloads in flight, not when they
    will be in (``PlanContext.in_flight``; tests/unit/edge_client/test_adaptation.py shows the
    live side): the next request leaves a round trip before a response ends, so at 0.2 Mbit/s and
    50 ms every choice after the first is told of one download, its first bytes in (its rest flows
    from now), with a round trip of bytes, 1250, still to come."""
    from sakura.edge_client import policy as policies

    told: dict[int, tuple[float, tuple[tuple[float, int], ...]]] = {}
    real = policies.RobustMPCPolicy.choose

    def spy(self, ctx):
        told.setdefault(ctx.index, (ctx.now, ctx.in_flight))
        return real(self, ctx)

    monkeypatch.setattr(policies.RobustMPCPolicy, "choose", spy)
    EditSimulator(pinned_geometry, steady(0.2), 1.0, rtt_s=0.05).run("sakura-fetch-only")
    assert told[0][1] == ()
    for now, in_flight in (told[i] for i in range(1, 6)):
        (flows_from, nbytes), = in_flight
        assert flows_from == now
        assert nbytes == pytest.approx(0.05 * 0.2e6 / 8, abs=1)


class _AbandonsAtOnce:
    """Abandons every download above the smallest level at its first check (``ABANDON_MIN_S``)."""

    name = "abandons-at-once"

    def choose(self, ctx):
        return ctx.levels[-1]

    def abandon(self, ctx, level, received, rate):
        return ctx.levels[0]


def test_the_link_tells_of_a_download_abandoned_at_the_level_it_was_asked_for(pinned_geometry):
    """The simulated fetcher decides a download's abandonment when it is asked for; until it is
    abandoned, the phone knows of it at the level it asked for (its first bytes in), not the smaller
    one it switched to; then of the smaller one's request, no byte in yet; nothing once it is in."""
    g = pinned_geometry
    link = SimulatedLink(g, steady(0.2), 1.0, rtt_s=0.05, cold=False, warm_template=True)
    smallest, largest = g.levels[0], g.levels[-1]
    shard = link.fetch(3, largest, 0.0, 0.0, link.primed_estimator(), _AbandonsAtOnce(), [], 0.0)
    assert shard.abandoned == [largest] and shard.level == smallest
    switched = 0.05 + ABANDON_MIN_S  # a round trip, then the first check
    (asked, received, length), = link.in_flight(0.05 + ABANDON_MIN_S / 2)
    assert (asked, length) == (0.0, g.sizes[largest][3]) and received > 0
    assert link.in_flight(switched + 0.01) == [(switched, 0, g.sizes[smallest][3])]
    assert link.in_flight(arrived(shard)) == []
    assert link.in_flight(arrived(shard) - 0.01, exclude=(3,)) == []


def test_the_phone_learns_of_a_download_when_it_ends_and_times_a_round_trip_only_alone(pinned_geometry):
    """The simulated link computes a download when it is asked for; the phone's estimator learns
    its rate when it ends (its first second at 10 Mbit/s after three at 1), and its round trip
    only where nothing else was on the link (the live fetcher's rule)."""
    g = pinned_geometry
    step = BandwidthTrace("step", "test", np.array([0.0, 5.0]), np.array([1.0, 10.0]), 600.0)
    link = SimulatedLink(g, step, 5.0, rtt_s=0.05, cold=False, warm_template=True)
    est, untold = link.primed_estimator(), link.primed_estimator()
    first = link.fetch(1, g.levels[-1], 0.0, 0.0, est, None, [], 0.0)
    queued = link.fetch(2, g.levels[-1], 0.0, arrived(first), est, None, [], 0.0)  # behind the first
    assert est.estimate(arrived(first) - 1e-3) == untold.estimate(arrived(first) - 1e-3)
    assert untold.estimate(arrived(first)).error == 0 < 0.8 < est.estimate(arrived(first)).error  # 10x faster
    assert est.rtt_s(arrived(queued)) == pytest.approx(0.05)  # the first's; the queued one's wait is not one


# -- the live hybrid edits' judgements of time (tests/unit/edge_client/test_hybrid_edit.py) ----------
def paced(g: EditGeometry, block_s: float, gap_s: float = 0.05) -> EditGeometry:
    """The pinned geometry on a phone paced as the live tests pace theirs (``PacedDevice``): each
    template block ``block_s``, the compute between two shards ``gap_s``."""
    return replace(g, shard_compute_s=[block_s] * len(g.shard_compute_s), gaps_s=[gap_s] * len(g.gaps_s))


def computed(edit) -> list[int]:
    return [s.index for s in edit.shards if s.computed]


def test_in_between_the_hybrid_computes_the_first_blocks_and_fetches_the_rest(pinned_geometry):
    """A phone computing a block in 0.1 s on a steady 0.1 Mbit/s link: fetching the first blocks
    would end after computing them, so it computes them, and the link brings the rest in time
    (the live edit carries out such a split: test_hybrid_edit.py)."""
    edit = EditSimulator(paced(pinned_geometry, 0.1), steady(0.1), 10.0, rtt_s=0.03).run("sakura")
    prefix = computed(edit)
    assert 0 < len(prefix) < len(edit.shards) and prefix == list(range(len(prefix))), edit.levels


def test_when_the_link_proves_faster_than_planned_the_hybrid_takes_blocks_back(pinned_geometry):
    """Planned at 0.1 Mbit/s, a phone computing a block in 0.15 s leaves the first blocks to itself;
    0.1 s into the edit the link turns 200 Mbit/s, the blocks above the split arrive fast, and the
    top of the prefix is fetched after all. On a steady link the plan holds."""
    g = paced(pinned_geometry, 0.15)

    def edit(mbps: float):
        trace = BandwidthTrace("step", "test", np.array([0.0, 10.1]), np.array([0.1, mbps]), 600.0)
        return EditSimulator(g, trace, 10.0, rtt_s=0.03).run("sakura")

    steady_edit, faster = edit(0.1), edit(200.0)
    assert computed(steady_edit) and not any(s.taken_back for s in steady_edit.shards), steady_edit.levels
    taken = [s.index for s in faster.shards if s.taken_back]
    assert taken and not set(taken) & set(computed(faster)), faster.levels  # given back, and fetched
    kept = len(computed(faster))
    assert computed(faster) == list(range(kept))  # what the phone computed is still a prefix,
    assert sorted(taken) == list(range(kept, kept + len(taken)))  # the blocks above it are those taken back


def test_while_a_fresh_phone_times_its_first_block_the_link_fetches_the_pass_from_the_top(pinned_geometry):
    """A fresh phone (cold: it never computed a block) computes block 0 to learn what a block costs
    before it plans the split. Meanwhile the link brings the pass from its top down, so on a fast
    link every shard above block 1 (the next the split decides) is on its way before block 0 is
    computed, and the fresh edit costs the warm one no more than timing that block (before, the
    link idled while block 0 was computed)."""
    g = paced(pinned_geometry, 0.3)
    fresh, warm = (EditSimulator(g, steady(10.0), 10.0, rtt_s=0.03, cold=cold).run("sakura") for cold in (True, False))
    assert computed(fresh) == [0], fresh.levels
    timed, ahead = fresh.shards[0].consumed_at, fresh.shards[2:]
    assert all(s.requested_at < timed for s in ahead) and fresh.shards[1].requested_at >= timed
    assert [s.index for s in sorted(ahead, key=lambda s: s.requested_at)] == [5, 4, 3, 2]  # from the top down
    assert fresh.latency_s <= warm.latency_s + g.shard_compute_s[0] + 1e-9  # virtual seconds, not this machine's


def test_a_fresh_phone_whose_blocks_beat_a_round_trip_computes_the_top_it_asked_for(pinned_geometry):
    """The reference model's blocks cost the phone milliseconds, less than a shard's round trip:
    the shard the link was asked for while block 0 was timed is computed when the model reaches
    it (its first byte cannot come sooner than a round trip after its request), so the fresh
    edit ends with the phone alone's."""
    sim = EditSimulator(pinned_geometry, steady(50.0), 10.0, rtt_s=0.05, cold=True)
    fresh, alone = sim.run("sakura"), sim.run("on-device")
    assert computed(fresh) == list(range(len(fresh.shards))) and fresh.stall_s < 1e-9  # virtual time
    assert fresh.latency_s == pytest.approx(alone.latency_s, rel=0.01)


@pytest.mark.parametrize(("rates", "at_least"), [
    ((20.0, 20.0, 0.0), 2.5e6),  # the silence runs to the start: that transfer is still on its way
    ((20.0, 0.0, 20.0), 1.25e6 / 2),  # the transfer that spans the silence, observed when it ends
    ((0.0, 0.0, 0.0), None),  # nothing completed: nothing known
])
def test_a_warm_phone_knows_the_transfers_of_its_last_seconds_and_a_silence_is_none(pinned_geometry, rates,
                                                                                    at_least):
    """The warm phone used the link for the three seconds before the edit: a transfer a second
    (here 20 Mbit/s: 2.5 MB). A second without a byte completes no transfer; observed as one byte
    in a second, a silence just before the start set the estimator's error in the hundreds of
    thousands, and the phone computed every block for 37 s where fetching took 0.6 of the time."""
    from sakura.evaluation.sim_link import SimulatedLink

    trace = BandwidthTrace("outage", "test", np.array([0.0, 7.0, 8.0, 9.0, 10.0]), np.array([20.0, *rates, 20.0]),
                           600.0)
    estimate = SimulatedLink(pinned_geometry, trace, 10.0, rtt_s=0.03, cold=False,
                             warm_template=False).primed_estimator().estimate(0.0)
    if at_least is None:
        assert estimate is None
    else:
        # a rate of the simulated link (bytes of the trace per second of its own time): no clock is read
        assert estimate is not None and estimate.bytes_per_s >= at_least * (1 - 1e-9)
