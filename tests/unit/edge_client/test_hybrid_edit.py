"""Compute or fetch, live: real edits through the shard API over an in-process trace link, with an
emulated phone of known speed (PacedDevice), so each outcome follows from the timing, not luck."""

from __future__ import annotations

import numpy as np

from sakura.edge_client import COMPUTE, EdgeSession, EditResult
from sakura.emulation import PacedDevice, TraceLink
from sakura.emulation.traces import BandwidthTrace
from sakura.platform.images import load_image
from sakura.platform.models import ModelAdapter

PHOTO, TEMPLATE = "skimage:coffee", "portrait"
RTT_S = 0.03
SHARDS = 6
SPLIT_MBPS = 0.1


def edits(url: str, model: ModelAdapter, trace: BandwidthTrace, device: PacedDevice | None, *,
          warm_ups: tuple[float, ...] = (0.0,), at: float = 0.0) -> EditResult:
    """The edit under test from ``at`` seconds into ``trace``, after one edit from each of
    ``warm_ups`` so the phone knows its link and what computing a block costs it."""
    link = TraceLink(trace, rtt_s=RTT_S)
    with EdgeSession(url, link=link, device=device, models=lambda _: model) as session:
        for offset in (*warm_ups, at):
            link.offset_s = offset
            link.start()
            result = session.edit(load_image(PHOTO), TEMPLATE, 1)
        return result


def exact(url: str, model: ModelAdapter) -> np.ndarray:
    with EdgeSession(url, models=lambda _: model) as session:
        return session.edit(load_image(PHOTO), TEMPLATE, 1, "fixed-full").image


def test_a_dead_link_computes_every_block_and_the_image_is_the_lossless_one(api, reference_model):
    """Cold phone: it has never computed a block, so it learns at the first one it would wait for."""
    result = edits(api.url, reference_model, BandwidthTrace.constant(0.1), None, warm_ups=())
    assert result.computed == list(range(SHARDS)) and result.levels == [COMPUTE] * SHARDS
    assert np.array_equal(result.image, exact(api.url, reference_model))


def test_a_fast_link_fetches_every_block_when_computing_is_slow(api, reference_model):
    """Two warm-ups teach the phone its link and what a block costs it (it computes one to learn).
    A block costs the phone 2 s, far beyond a shard's round trip even when a busy host slows the
    server tenfold (at 0.5 s, a CI run with a second test process read block 0 as cheaper)."""
    device = PacedDevice(0.05, template_s=2.0)
    result = edits(api.url, reference_model, BandwidthTrace.constant(1000.0), device, warm_ups=(0.0, 0.0))
    assert result.computed == [] and COMPUTE not in result.levels and result.bytes > 0


def test_in_between_the_phone_computes_the_first_blocks_and_fetches_the_rest(api, reference_model):
    device = PacedDevice(0.05, template_s=0.1)
    result = edits(api.url, reference_model, BandwidthTrace.constant(1.0), device)
    assert 0 < len(result.computed) < SHARDS, result.levels  # some blocks computed, some fetched
    assert 0 in result.computed  # the first block is due at once: computing it beats its round trip


def test_when_the_link_dies_mid_edit_the_late_blocks_are_computed(api, reference_model):
    """Fast for the warm-up and the edit's first 0.15 s, then 20 kbit/s: a block still to come would
    take seconds, so the phone runs the template pass up to it instead, and the edit completes
    (before the hybrid, a download caught by the drop failed the edit after its retries)."""
    step = BandwidthTrace("step-down", "test", np.array([0.0, 30.0]), np.array([100.0, 0.02]), 3600.0)
    device = PacedDevice(0.1, template_s=0.02)
    result = edits(api.url, reference_model, step, device, at=29.85)
    assert result.levels[-1] == COMPUTE, result.levels
    # how long it stalls first is this machine's timing; the simulator's replay of the rule bounds
    # it on a trace (tests/unit/evaluation/test_baselines.py, a stalled download given up)


def test_the_on_device_policy_computes_every_block_and_fetches_no_shard(api, reference_model):
    """The phone alone, run by the same client: the preamble brings the source, no shard is asked for."""
    with EdgeSession(api.url, models=lambda _: reference_model) as session:
        result = session.edit(load_image(PHOTO), TEMPLATE, 1, "on-device")
    assert result.computed == list(range(SHARDS)) and result.bytes == 0
    assert np.array_equal(result.image, exact(api.url, reference_model))


def split_edit(api_url: str, model: ModelAdapter, edit_rate_mbps: float) -> EditResult:
    """Warm-ups at ``SPLIT_MBPS`` plan a split (the phone computes the first blocks, the link brings
    the rest); the edit then starts 0.1 s before the link turns ``edit_rate_mbps``. At 0.1 Mbit/s
    the split leaves a block or two more to the phone than its first two (the rate sets a compact
    shard's download against a block's 0.15 s: with v1's shards, 0.5 Mbit/s did; with the transform
    levels' ~20x smaller ones, 0.5 Mbit/s left only the first block to the phone)."""
    trace = BandwidthTrace("step", "test", np.array([0.0, 30.0]), np.array([SPLIT_MBPS, edit_rate_mbps]), 3600.0)
    return edits(api_url, model, trace, PacedDevice(0.05, template_s=0.15), at=29.9)


def test_when_the_link_proves_faster_than_planned_the_phone_gives_blocks_back_to_it(api, reference_model):
    """Re-planning the other way: the blocks above the split arrive fast, so the fetch stage takes
    the top of the prefix left to the phone back before the phone reaches it."""
    steady = split_edit(api.url, reference_model, SPLIT_MBPS)
    faster = split_edit(api.url, reference_model, 200.0)
    taken = [s.index for s in faster.timeline.shards if s.taken_back]
    assert 0 < len(steady.computed), steady.levels  # the plan at SPLIT_MBPS leaves blocks to the phone
    assert not any(s.taken_back for s in steady.timeline.shards), steady.levels  # and holds on a steady link
    assert taken and not set(taken) & set(faster.computed), faster.levels  # given back, and fetched
    kept = len(faster.computed)
    assert faster.computed == list(range(kept))  # what the phone computed is still a prefix,
    assert sorted(taken) == list(range(kept, kept + len(taken)))  # the blocks above it are those taken back
