"""The systems that do not overlap fetching with the model: everything fetched then computed
(``sakura-no-pipeline``, ``full-sequential``), CacheGen by its own rule, and the on-device
baselines. Each replays one edit on a :class:`~sakura.evaluation.sim_link.SimulatedLink` (and,
where the model takes shards, a :class:`~sakura.evaluation.sim_model.SimulatedModel`)."""

from __future__ import annotations

from sakura.edge_client import LevelPolicy
from sakura.edge_client.planning import MAX_IN_FLIGHT
from sakura.edge_client.timeline import ShardTiming, Timeline
from sakura.evaluation.cachegen import select_config
from sakura.evaluation.sim_link import SimulatedLink, arrived, first_byte
from sakura.evaluation.sim_model import SimulatedModel


def ondevice(sim: SimulatedLink, system: str) -> Timeline:
    """Download what the baseline needs (cold), then compute everything on the phone."""
    nbytes = 0 if sim.warm_template else sim.g.prepared_bytes if system == "on-device-prepared" else sim.g.source_bytes
    t = sim.fetched(0.0, nbytes)
    return Timeline(system, [], preamble_s=t, preamble_bytes=nbytes, compute_start=t,
                    compute_end=t + sim.g.ondevice_compute_s(system))


def sequential(sim: SimulatedLink, model: SimulatedModel, policy: LevelPolicy, system: str) -> Timeline:
    """Fetch everything (levels chosen as the pipelined client would), decode it, then compute."""
    est, t = sim.primed_estimator(), sim.preamble_done()
    shards: list[ShardTiming] = []
    request = link_free = t
    for i in range(sim.g.shards):
        ctx = sim.context(i, request, est, [], t, request, sim.in_flight(request))
        shard = sim.fetch(i, policy.choose(ctx), request, link_free, est, None, [], t)
        shards.append(shard)
        link_free, request = arrived(shard), _next_request(sim, shards)
    return _decode_then_compute(sim, model, system, shards, link_free)


def cachegen(sim: SimulatedLink, model: SimulatedModel, ladder: list[str], system: str, slo_s: float) -> Timeline:
    """CacheGen adapted to DiT, by its own rule (:func:`~sakura.evaluation.cachegen.select_config`):
    per chunk (shard) the finest configuration whose transfer at the last measured throughput
    fits ``SLO / chunks``, else its text fallback: the phone computes that chunk, which needs
    the reference pass through every block below it in the same step. Decode streams with the
    fetch; the fallbacks are computed once everything is decoded, then the model runs (no
    compute overlap). A fresh session has measured nothing: its first chunk goes at the coarsest
    configuration, and its transfer is the first measurement."""
    estimate = sim.primed_estimator().estimate(0.0)
    t = sim.preamble_done(sim.g.prepared_bytes)
    throughput = None if estimate is None else estimate.bytes_per_s
    budget = slo_s / sim.g.shards
    shards: list[ShardTiming] = []
    request = link_free = decode_free = t
    for i in range(sim.g.shards):
        sizes = {lv: sim.g.sizes[lv][i] for lv in ladder}
        level = ladder[0] if throughput is None else select_config(sizes, throughput, budget, ladder)
        if level is None:
            shards.append(ShardTiming(i, level=sim.g.levels[-1], source="computed"))
            continue
        shard = sim.fetch(i, level, request, link_free, None, None, [], t, rate=throughput)
        throughput = shard.bytes / max(arrived(shard) - first_byte(shard), 1e-6)
        shard.decode_started_at = max(arrived(shard), decode_free)
        shard.decoded_at = decode_free = shard.decode_started_at + sim.g.decode_s[level][i]
        shards.append(shard)
        link_free, request = arrived(shard), _next_request(sim, [s for s in shards if not s.computed])
    fallback = _fallback_compute(sim, shards)
    edit = _compute_after(sim, model, shards, system, decode_free + fallback, sim.g.prepared_bytes)
    edit.precompute_s = fallback
    return edit


def _fallback_compute(sim: SimulatedLink, shards: list[ShardTiming]) -> float:
    """Computing the shards left to the phone (every block below each, in its pass)."""
    return sim.g.template_compute_s(s.index for s in shards if s.computed)


def _next_request(sim: SimulatedLink, shards: list[ShardTiming]) -> float:
    """When a client fetching without the pipeline's queues sends the next request: once the
    last is near done, never with more than ``MAX_IN_FLIGHT`` out."""
    window = arrived(shards[-MAX_IN_FLIGHT]) if len(shards) >= MAX_IN_FLIGHT else 0.0
    return max(window, sim.near_done(shards[-1]))


def _decode_then_compute(sim: SimulatedLink, model: SimulatedModel, system: str, shards: list[ShardTiming],
                         t: float) -> Timeline:
    for shard in shards:
        shard.decode_started_at = t
        shard.decoded_at = t = t + sim.g.decode_s[shard.level][shard.index]
    return _compute_after(sim, model, shards, system, t)


def _compute_after(sim: SimulatedLink, model: SimulatedModel, shards: list[ShardTiming], system: str, t: float,
                   objects: int | None = None) -> Timeline:
    """Every shard is on the phone at ``t``: the model computes without a stall. ``objects``: the
    bytes the preamble response bundled with the manifest (default: the context objects)."""
    edit = Timeline(system, [], compute_start=t, preamble_s=sim.preamble_done(objects),
                    preamble_bytes=sim.preamble_bytes(objects))
    for shard in shards:
        model.consume(edit, shard, t)
    return edit
