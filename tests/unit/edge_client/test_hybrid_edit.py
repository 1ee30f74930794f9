"""Compute or fetch, live: real edits through the shard API over an in-process trace link, with an
emulated phone (PacedDevice). Each outcome holds at any speed of this machine (issue 36, item 4):
a link that lets the phone down delivers nothing at all (a proxy holds those shard requests, so
no race between this machine's compute and a slow download decides which block is whose), what
a block costs the phone is told to it rather than timed here (``ToldCosts``), and the one race a
test is about is held open by the phone until its outcome is in. The judgements of time (at
which rate a phone computing a block in 0.1 s splits the edit; a link proving faster than
planned) are the simulator's, on virtual time (``tests/unit/evaluation/test_simulator.py``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np

from sakura.edge_client import COMPUTE, EdgeSession, EditResult
from sakura.edge_client.planning import PlanContext
from sakura.edge_client.policy import HybridPolicy, LevelPolicy
from sakura.edge_client.timeline import Progress
from sakura.emulation import PacedDevice, TraceLink
from sakura.emulation.traces import BandwidthTrace
from sakura.platform.images import load_image
from sakura.platform.models import ModelAdapter
from tests.edge_servers import HANG_S
from tests.unit.edge_client._told_costs import DEAR_S, ToldCosts

PHOTO, TEMPLATE = "skimage:coffee", "portrait"
RTT_S = 0.03
SHARDS = 6
#: The client's timeout: longer than the proxy holds a request, so no download here ever times
#: out (a block is the phone's by the phone's own rule, never because a download failed).
TIMEOUT_S = 10 * HANG_S
HANG_GUARD_S = 60.0  # how long the held phone waits at most: never reached while the client works


def edits(url: str, model: ModelAdapter, trace: BandwidthTrace, device: PacedDevice | None, *,
          warm_ups: int = 1, costs: Sequence[float] | None = None, before: Callable[[], object] | None = None,
          policy: str | LevelPolicy = "hybrid", on_progress: Callable[[Progress], None] | None = None) -> EditResult:
    """The edit under test with ``policy``, after ``warm_ups`` hybrid edits so the phone knows its
    link (and, unless ``costs`` tells it, what computing a block costs it); ``before`` runs just
    before the edit under test."""
    link = TraceLink(trace, rtt_s=RTT_S)
    with EdgeSession(url, link=link, device=device, models=lambda _: model, timeout_s=TIMEOUT_S) as session:
        if costs is not None:
            session.compute_model = ToldCosts(costs)
        for _ in range(warm_ups):
            link.start()
            session.edit(load_image(PHOTO), TEMPLATE, 1)
        if before is not None:
            before()
        link.start()
        return session.edit(load_image(PHOTO), TEMPLATE, 1, policy, on_progress=on_progress)


def exact(url: str, model: ModelAdapter) -> np.ndarray:
    with EdgeSession(url, models=lambda _: model) as session:
        return session.edit(load_image(PHOTO), TEMPLATE, 1, "fixed-full").image


def test_a_dead_link_computes_every_block_and_the_image_is_the_lossless_one(api, proxy, reference_model):
    """Dead: the server's end holds every shard request, so no byte of a shard ever comes, however
    fast or slow this machine computes (a 0.1 Mbit/s link, as this test had, still delivers: a
    busy machine's model can reach a block after its shard came). Cold phone: it has never
    computed a block, so it learns at the first one it would wait for."""
    proxy.add(r"/shards/", "hang", times=10**6)
    result = edits(proxy.url, reference_model, BandwidthTrace.constant(0.1), None, warm_ups=0)
    assert result.computed == list(range(SHARDS)) and result.levels == [COMPUTE] * SHARDS and result.bytes == 0
    assert np.array_equal(result.image, exact(api.url, reference_model))


def test_a_fast_link_fetches_every_block_when_computing_is_slow(api, reference_model):
    """Computing a block is dear (told: how fast this machine computes one must not decide; timed
    at 0.5 s a block, a CI run beside a second test process read block 0 as cheaper than its round
    trip), far beyond a shard's round trip: every block is fetched."""
    result = edits(api.url, reference_model, BandwidthTrace.constant(1000.0), PacedDevice(0.05),
                   costs=[DEAR_S] * SHARDS)
    assert result.computed == [] and COMPUTE not in result.levels and result.bytes > 0


def test_in_between_the_phone_computes_the_first_blocks_and_fetches_the_rest(api, reference_model):
    """The split, carried out live: the first block costs the phone a millisecond, less than the
    link's round trip (it is due at once: computing it beats fetching it), every other block is
    dear: the phone computes the first and the link brings the rest. At which rate a phone that
    computes every block in 0.1 s splits the edit is a judgement of time, replayed on virtual time
    (``test_simulator.py``, the phone in between)."""
    result = edits(api.url, reference_model, BandwidthTrace.constant(1.0), PacedDevice(0.05),
                   costs=[0.001, *[DEAR_S] * (SHARDS - 1)])
    assert result.computed == [0], result.levels
    assert COMPUTE not in result.levels[1:] and result.bytes > 0


def test_when_the_link_dies_mid_edit_the_late_blocks_are_computed(api, proxy, reference_model):
    """Fast for the warm-up, then dead for the last two shards of the edit: the server's end holds
    their requests, so none of their bytes ever comes (a link dropping to 20 kbit/s, as this test
    had, still delivers: a busy machine's model can reach block 5 after its download crawled in).
    The phone runs the template pass up to them instead, and the edit completes (before the hybrid,
    a download caught by the drop failed the edit after its retries)."""
    device = PacedDevice(0.1, template_s=0.02)
    result = edits(proxy.url, reference_model, BandwidthTrace.constant(100.0), device,
                   before=lambda: proxy.add(r"/shards/[45]/", "hang", times=10**6))
    assert result.levels[4:] == [COMPUTE] * 2, result.levels
    # whether the first four came over the link or from the phone, and how long it stalls first,
    # are this machine's timing; the simulator's replay of the rule bounds the stall on a trace
    # (tests/unit/evaluation/test_baselines.py, a stalled download given up)


def test_the_on_device_policy_computes_every_block_and_fetches_no_shard(api, reference_model):
    """The phone alone, run by the same client: the preamble brings the source, no shard is asked for."""
    with EdgeSession(api.url, models=lambda _: reference_model) as session:
        result = session.edit(load_image(PHOTO), TEMPLATE, 1, "on-device")
    assert result.computed == list(range(SHARDS)) and result.bytes == 0
    assert np.array_equal(result.image, exact(api.url, reference_model))


LEFT = 3  # the blocks the scripted split leaves to the phone


class LeavesThreeTakesBackTheTop(HybridPolicy):
    """A split set in advance, so that no timing decides it: blocks 0-2 are left to the phone and
    the rest fetched at compact; then block 2, the top of the prefix, is taken back."""

    def choose(self, ctx: PlanContext) -> str:
        return COMPUTE if ctx.can_compute and ctx.index < LEFT else "compact"

    def take_back(self, ctx: PlanContext, top: int) -> str | None:
        return "compact" if top == LEFT - 1 else None


class HeldAfterEachBlock(PacedDevice):
    """A phone that, after each block of the template pass it computes, waits until ``release``
    is set (or the hang guard passes)."""

    def __init__(self, release: threading.Event) -> None:
        super().__init__(0.05, template_s=0.15)
        self.release = release

    def after_template(self, seconds: float) -> None:
        super().after_template(seconds)
        self.release.wait(HANG_GUARD_S)


def test_when_the_link_proves_faster_than_planned_the_phone_gives_blocks_back_to_it(api, reference_model):
    """Re-planning the other way, live: the fetch stage takes the top of the prefix left to the
    phone back before the phone reaches it, fetches it, and the phone computes only the rest. The
    phone is held after its first block until the block taken back is in, so this machine's speed
    cannot decide the race; when the policy takes a block back (the blocks above the split arrived
    faster than planned, not on a steady link) is replayed on virtual time (``test_simulator.py``)."""
    taken_in = threading.Event()

    def progress(event: Progress) -> None:
        if event.kind == "fetched" and event.shard == LEFT - 1:
            taken_in.set()

    result = edits(api.url, reference_model, BandwidthTrace.constant(200.0), HeldAfterEachBlock(taken_in), warm_ups=0,
                   costs=[DEAR_S] * SHARDS, policy=LeavesThreeTakesBackTheTop(), on_progress=progress)
    assert taken_in.is_set()
    taken = [s.index for s in result.timeline.shards if s.taken_back]
    assert taken == [LEFT - 1] and result.computed == list(range(LEFT - 1)), result.levels  # still a prefix
    assert result.levels[LEFT - 1:] == ["compact"] * (SHARDS - LEFT + 1)  # the block taken back, and those above it


class AsksOnceTheTopIsIn(PacedDevice):
    """A fresh phone whose model asks for its first shard (so computes and times block 0) only once
    ``top`` came over the link (or the hang guard passed): this machine's speed cannot decide
    whether the link had time to bring it."""

    def __init__(self, top: threading.Event) -> None:
        super().__init__(0.0)
        self.top, self._first = top, True

    def after_compute(self, seconds: float) -> None:
        if self._first:
            self._first = False
            self.top.wait(HANG_GUARD_S)


def test_while_a_fresh_phone_times_its_first_block_the_link_brings_the_top_of_the_pass(api, reference_model):
    """A fresh session knows neither its link nor what a block costs it, so it computes block 0 to
    learn the latter before it plans the split. Meanwhile the fetch stage asks for the pass from
    its top down (every split but computing all of it fetches the top), and the link does not
    idle: the top shard arrives before block 0 is computed, and the model takes it as fetched."""
    top = threading.Event()

    def progress(event: Progress) -> None:
        if event.kind == "fetched" and event.shard == SHARDS - 1:
            top.set()

    result = edits(api.url, reference_model, BandwidthTrace.constant(100.0), AsksOnceTheTopIsIn(top), warm_ups=0,
                   on_progress=progress)
    assert top.is_set(), result.levels
    shards = result.timeline.shards
    assert shards[0].computed and shards[SHARDS - 1].requested_at < shards[0].consumed_at
    assert result.levels[SHARDS - 1] != COMPUTE, result.levels
