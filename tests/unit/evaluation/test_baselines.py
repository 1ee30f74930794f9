"""The baselines and the shared starting point: cold and warm phones, the three on-device systems,
CacheGen's own rule with its text fallback, and the regime map's crossovers."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from sakura.edge_client.late_download import LATE_CHECK_S
from sakura.edge_client.policy import HybridPolicy
from sakura.emulation.traces import BandwidthTrace
from sakura.evaluation.geometry import ManifestWire
from sakura.evaluation.profiles import device_profile
from sakura.evaluation.regime import crossovers, hopeless, link_rates, regime_curve
from sakura.evaluation.simulator import EditSimulator
from sakura.evaluation.workloads import WORKLOADS, CodecRates, analytic_geometry

LEVELS, CACHEGEN = ["compact", "medium", "full"], ["cachegen-low", "cachegen-coarse", "cachegen-fine"]


@pytest.fixture(scope="module")
def klein():
    """klein 4B with a 1024x1024 reference on the flagship NPU; codec rates in round numbers."""
    rates = CodecRates("test", {"compact": 1 / 7, "medium": 1 / 3.5, "full": 1.0, "cachegen-low": 1 / 5,
                                "cachegen-coarse": 1 / 3.8, "cachegen-fine": 1 / 2.9},
                       {lv: 4e-9 for lv in LEVELS + CACHEGEN}, ManifestWire(1500.0, 150.0, 1400.0, 40.0), "full")
    return analytic_geometry(WORKLOADS["klein-4b-ref1024"], device_profile("flagship-npu"), rates, LEVELS, CACHEGEN)


def _sim(g, mbps: float, **kw) -> EditSimulator:
    return EditSimulator(g, BandwidthTrace.constant(mbps), 0.0, rtt_s=0.055, **kw)


def test_cold_phones_fetch_what_they_need_and_warm_ones_do_not(klein):
    cold, warm = _sim(klein, 50.0), _sim(klein, 50.0, warm_template=True)
    source = cold.fetched(0.0, klein.source_bytes)
    assert source == pytest.approx(0.055 + klein.source_bytes * 8 / 50e6)
    assert cold.run("on-device").latency_s == pytest.approx(source + klein.ondevice_compute_s("on-device"))
    assert warm.run("on-device").latency_s == pytest.approx(klein.ondevice_compute_s("on-device"))
    prepared = cold.fetched(0.0, klein.prepared_bytes)
    assert cold.run("on-device-prepared").latency_s == pytest.approx(
        prepared + klein.ondevice_compute_s("on-device-prepared"))
    # SAKURA cold: one preamble response with the manifest and the context objects, then the KV
    assert cold.preamble_done() == pytest.approx(cold.fetched(0.0, klein.manifest_bytes + klein.context_bytes))
    assert warm.preamble_done() == 0.0
    assert warm.run("sakura").latency_s < cold.run("sakura").latency_s


def test_the_hybrid_fetches_the_template_jpeg_and_its_vae_makes_the_source_before_the_first_block(klein):
    """What the stock pipeline downloads, not the latents: a sixth of their bytes; the VAE runs when
    the phone first computes a block. The same edit from the latents is the geometry without an image."""
    latents = klein.prepared_bytes - klein.context_bytes
    assert 0 < klein.image_bytes < klein.source_bytes and klein.image_bytes * 5 < latents
    from_latents = replace(klein, image_bytes=0)
    for g, source in [(klein, klein.image_bytes), (from_latents, latents)]:
        edit = _sim(g, 0.2).run("sakura")  # so slow a link that the phone computes every block
        assert all(s.computed for s in edit.shards)
        assert edit.preamble_bytes == g.unhashed_manifest_bytes + g.context_bytes + source  # no shard hashes
        prepare = g.reference_encode_s if g.image_bytes else 0.0
        first = edit.shards[0]
        assert first.consumed_at - first.needed_at == pytest.approx(prepare + g.shard_compute_s[0])
    assert _sim(klein, 0.2).run("sakura").latency_s < _sim(from_latents, 0.2).run("sakura").latency_s


def test_a_computing_phone_fetches_the_shard_hashes_only_before_its_first_fetched_shard(klein):
    """Its manifest comes without them (``?hashes=0``): a phone that computes every block never
    fetches them; one that fetches pays their bytes once, before its first shard; a fetch-only
    phone gets them in its manifest."""
    assert klein.unhashed_manifest_bytes + klein.shard_hashes_bytes <= klein.manifest_bytes * 1.1
    preamble = klein.unhashed_manifest_bytes + klein.context_bytes + klein.image_bytes
    fast = _sim(klein, 500.0)
    fetching = fast.run("sakura")
    assert not all(s.computed for s in fetching.shards)
    assert fetching.preamble_bytes == preamble + klein.shard_hashes_bytes
    first = min(s.requested_at for s in fetching.shards if not s.computed)
    preamble_done = fast.preamble_done(klein.context_bytes + klein.image_bytes, hashed=False)
    assert first >= fast.fetched(preamble_done, klein.shard_hashes_bytes) - 1e-9  # requested once they are in
    assert fast.run("sakura-fetch-only").preamble_bytes == klein.manifest_bytes + klein.context_bytes
    assert _sim(klein, 500.0, warm_template=True).run("sakura").preamble_bytes == 0


def test_the_uncached_phone_pays_the_reference_pass_at_every_step(klein):
    sim = _sim(klein, 50.0, warm_template=True)
    times = {s: sim.run(s).latency_s for s in ("on-device", "on-device-uncached", "on-device-prepared")}
    assert times["on-device-uncached"] - times["on-device"] == pytest.approx((klein.steps - 1) * klein.reference_pass_s)
    assert times["on-device-prepared"] < times["on-device"] < times["on-device-uncached"]


def test_cachegen_recomputes_every_chunk_on_a_hopeless_link_and_fetches_its_finest_on_a_fast_one(klein):
    slow = _sim(klein, 0.5).run("cachegen")
    assert all(s.computed and s.bytes == 0 for s in slow.shards)
    preamble = _sim(klein, 0.5).preamble_done(klein.prepared_bytes)
    # one reference pass computes every block's KV (a KV-cached model has one pass), then the edit
    assert slow.latency_s == pytest.approx(preamble + sum(klein.shard_compute_s) + klein.compute_s)
    fast = _sim(klein, 100_000.0).run("cachegen")
    assert {s.level for s in fast.shards} == {"cachegen-fine"} and not any(s.computed for s in fast.shards)


def test_a_fresh_cachegen_session_fetches_its_first_chunk_coarsest_then_adapts(klein):
    cold = _sim(klein, 100_000.0, cold=True).run("cachegen")
    assert cold.shards[0].level == "cachegen-low" and not cold.shards[0].computed
    assert {s.level for s in cold.shards[1:]} == {"cachegen-fine"}


def test_cachegen_slo_moves_its_choice(klein):
    """SLO / chunks is its per-chunk budget: a longer SLO buys finer levels on the same link."""
    def levels(slo: float) -> set[str]:
        return {s.level for s in _sim(klein, 400.0, cachegen_slo_s=slo).run("cachegen").shards}
    assert levels(0.01) == {"full"}  # nothing fits: all computed on the phone (exact KV)
    assert levels(1e4) == {"cachegen-fine"}


def test_crossovers_interpolate_in_log_space():
    assert crossovers([1.0, 100.0], [0.1, 10.0]) == pytest.approx([10.0])
    assert crossovers([1.0, 10.0, 100.0], [2.0, None, 0.5]) == []
    assert crossovers([1.0, 10.0, 100.0], [2.0, 0.5, 2.0]) == pytest.approx([10 ** 0.5, 10 ** 1.5])


def test_the_regime_map_covers_every_rate_and_rises_with_it(klein):
    """The hybrid is never hopeless (it computes what the link cannot bring), so every rate has a
    ratio, even where fetching alone would be (there the fetch-only client is not simulated)."""
    curve = regime_curve([klein], link_rates(points=9), rtt_s=0.055)
    ratio = curve.ratios["ondevice_over_sakura"]
    assert hopeless(_sim(klein, curve.rates_mbps[0])) and None not in ratio
    assert ratio == sorted(ratio) and ratio[-1] > 1.0  # at 2 Gbit/s SAKURA wins
    assert len(curve.crossovers_mbps["ondevice_over_sakura"]) == 1


def test_the_simulated_hybrid_takes_blocks_back_when_the_link_speeds_up(klein):
    """The live fetch stage's re-planning the other way, replayed: at 300 Mbit/s a warm phone leaves
    the first blocks to its NPU; 0.3 s in, the link turns 3 Gbit/s and the top of that prefix is
    fetched after all, which ends the edit sooner than keeping the first plan."""
    class FirstPlanKept(HybridPolicy):
        take_back = None

    trace = BandwidthTrace("step", "test", np.array([0.0, 10.3]), np.array([300.0, 3000.0]), 3600.0)
    sim = EditSimulator(klein, trace, 10.0, rtt_s=0.055, warm_template=True)
    replanned, kept = sim.run("sakura"), sim.pipelined(FirstPlanKept(), "kept")
    taken = [s for s in replanned.shards if s.taken_back]
    assert taken and not any(s.computed for s in taken)
    assert not any(s.taken_back for s in kept.shards) and any(s.computed for s in kept.shards)
    assert sum(s.computed for s in replanned.shards) < sum(s.computed for s in kept.shards)
    assert replanned.latency_s < kept.latency_s


def test_a_phone_with_its_own_text_encoder_encodes_the_prompt_unless_fetching_is_known_sooner(klein):
    slow = _sim(klein, 2.0)  # 7.9 MB of embeddings: 32 s at 2 Mbit/s, against 0.22 s on the NPU
    light, own = slow.run("sakura"), slow.run("sakura-own-encoder")
    assert own.precompute_s == pytest.approx(klein.text_encode_s) and light.precompute_s == 0.0
    assert light.preamble_bytes - own.preamble_bytes == klein.context_bytes
    assert own.latency_s < light.latency_s - 20
    fast = _sim(klein, 2000.0)  # a round trip and 0.03 s of download: sooner than encoding
    fetched = fast.run("sakura-own-encoder")
    assert fetched.precompute_s == 0.0 and fetched.preamble_bytes == fast.run("sakura").preamble_bytes
    fresh = _sim(klein, 2000.0, cold=True).run("sakura-own-encoder")  # nothing measured: as the phone alone
    assert fresh.precompute_s == pytest.approx(klein.text_encode_s)
    # warm: the phone kept the embeddings, encoded or fetched, and neither encodes nor fetches them
    warm_slow = _sim(klein, 2.0, warm_template=True).run("sakura-own-encoder")
    warm_fast = _sim(klein, 2000.0, warm_template=True).run("sakura-own-encoder")
    assert warm_slow.precompute_s == warm_fast.precompute_s == 0.0
    assert warm_slow.preamble_bytes == warm_fast.preamble_bytes == 0


def test_the_simulated_compute_stage_rejudges_a_download_that_stalls_and_computes_it_instead(klein):
    """The live compute stage's extend rule (``late_download``), replayed: re-judged while the model
    waits, at the rate the download arrives at now. A warm phone on 3 Gbit/s fetches every block
    past a short prefix; the link drops to 2 Mbit/s with a download half-way in (the drop is placed
    on a download of the edit on the steady link: which block straddles a fixed moment moves with
    every change to the level choices). When the model asks for it, it looks on time;
    re-judged as it crawls, the phone computes the block from the frontier instead, and the edit
    ends long before that download would have."""
    steady = EditSimulator(klein, BandwidthTrace.constant(3000.0), 10.0, rtt_s=0.055, warm_template=True).run("sakura")
    fetched = [s for s in steady.shards if s.first_byte_at is not None and s.index > 0]
    crossing = fetched[len(fetched) // 2]
    drop = crossing.first_byte_at + 0.5 * (crossing.arrived_at - crossing.first_byte_at)  # type: ignore[operator]
    trace = BandwidthTrace("drop", "test", np.array([0.0, 10.0 + drop]), np.array([3000.0, 2.0]), 3600.0)
    edit = EditSimulator(klein, trace, 10.0, rtt_s=0.055, warm_template=True).run("sakura")
    extended = [s for s in edit.shards if s.computed and s.abandoned]
    assert extended, "no download was given up for the phone's compute"
    shard = extended[0]
    stall = next(st for st in edit.stalls if st.shard == shard.index)
    assert stall.start == pytest.approx(shard.needed_at) and stall.end > stall.start + 0.1  # waited, then gave up
    level = shard.abandoned[0]
    assert 0 < shard.bytes < klein.sizes[level][shard.index]  # part-way
    rest_s = (klein.sizes[level][shard.index] - shard.bytes) * 8 / 2e6
    # simulated seconds (the trace's virtual time), not this machine's
    assert edit.latency_s < stall.end + 5 < stall.end + rest_s


def test_a_download_that_stops_just_short_of_done_is_computed_instead_of_waited_for(klein):
    """The extend rule's stall: on a warm phone at 3 Gbit/s, the link dies for 10 s when a fetched
    block is 98% in. Its mean rate so far promises the last 2% within a block's compute for ever (it
    decays only as 1/t); nothing arrives while the model waits, so once it has waited about as long
    as computing takes, the phone computes that block and the rest instead of waiting for the link."""
    steady = EditSimulator(klein, BandwidthTrace.constant(3000.0), 10.0, rtt_s=0.055, warm_template=True).run("sakura")
    fetched = [s for s in steady.shards if s.first_byte_at is not None and s.index > 0]
    shard = fetched[len(fetched) // 2]
    dies = shard.first_byte_at + 0.98 * (shard.arrived_at - shard.first_byte_at)  # type: ignore[operator]
    trace = BandwidthTrace("dies", "test", np.array([0.0, 10.0 + dies, 20.0 + dies]),
                           np.array([3000.0, 0.0, 3000.0]), 3600.0)
    edit = EditSimulator(klein, trace, 10.0, rtt_s=0.055, warm_template=True).run("sakura")
    link_back = dies + 10  # on the trace's own clock
    # what happened, in order: no shard came over the link once it was back; the model went on
    assert not [s for s in edit.shards if s.source == "network" and s.arrived_at >= link_back]
    assert all(s.consumed_at < link_back for s in edit.shards)
    stalled = [st for st in edit.stalls if st.end > dies]
    # each stall is at most what computing the template pass up to its block would have cost
    assert stalled and all(st.end - st.start <= sum(klein.shard_compute_s[:st.shard + 1]) + 2 * LATE_CHECK_S
                           for st in stalled)
    assert any(s.computed and s.abandoned for s in edit.shards)
