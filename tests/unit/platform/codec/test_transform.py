"""Transform levels (wire format v2): a low-rank basis per tensor where the KV has one, the
identity where it has none, the rank following from the level's target, the target met on the
queries it is measured on, and factors that rebuild exactly what the decoder rebuilds."""

from __future__ import annotations

import numpy as np
import pytest

from sakura.platform.codec import (
    LevelSpec,
    TransformSpec,
    decode_shard,
    default_levels,
    encode_levels,
    encode_shard,
    encode_shards,
    peek_header,
    surrogate_probe,
    v1_levels,
)
from sakura.platform.codec.format_v2 import LowRankHeader
from sakura.platform.codec.lowrank import fit, quantise
from sakura.platform.codec.transform import joint
from sakura.platform.kv import FactoredPair, KVPair
from tests.unit.platform.codec.conftest import make_low_rank_pair, make_pair


def level(target: float, **kwargs) -> LevelSpec:
    return LevelSpec(name="t", transform=TransformSpec(target=target, **kwargs))


def attention_error(pair: KVPair, out: KVPair) -> float:
    probe = surrogate_probe(pair.k)
    return float(np.sqrt(probe.squared_error(probe.output(pair.k, pair.v), out.k, out.v)))


def header(payload: bytes) -> LowRankHeader:
    h = peek_header(payload)
    assert isinstance(h, LowRankHeader)
    return h


def test_a_low_rank_shard_keeps_its_rank_and_costs_a_fraction_of_v1():
    pair = make_low_rank_pair(4, 128, 16, rank=3, noise=1e-3)
    payload = encode_shard(pair, default_levels()["medium"])
    h = header(payload)
    assert all(t.basis and 3 <= t.rank <= 6 for t in h.tensors), h.tensors
    out = decode_shard(payload, expected_shape=pair.k.shape)
    assert out.k.dtype == np.float32 and attention_error(pair, out) <= 0.004 * 1.001
    v1 = encode_shard(pair, v1_levels()["medium"])
    assert len(payload) * 4 < len(v1)
    assert attention_error(pair, out) < attention_error(pair, decode_shard(v1))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("name", ["compact", "medium"])
def test_a_full_rank_shard_falls_back_to_the_identity_and_is_no_larger_than_v1_at_its_error(dtype, name):
    pair = make_pair(4, 256, 32, dtype=dtype, seed=3)
    v1 = encode_shard(pair, v1_levels()[name])
    error = attention_error(pair, decode_shard(v1))
    payload = encode_shard(pair, level(error))
    assert not any(t.basis for t in header(payload).tensors)
    assert attention_error(pair, decode_shard(payload)) <= error
    assert len(payload) <= len(v1)


def test_a_finer_target_costs_more_rank_and_bytes_for_less_error():
    pair = make_low_rank_pair(4, 128, 16, rank=8, noise=0.05, seed=2)
    coarse, fine = (encode_shard(pair, level(t)) for t in (0.03, 0.003))
    assert len(coarse) < len(fine)
    assert sum(t.rank for t in header(coarse).tensors) <= sum(t.rank for t in header(fine).tensors)
    assert attention_error(pair, decode_shard(fine)) < attention_error(pair, decode_shard(coarse)) <= 0.03 * 1.001


@pytest.mark.parametrize("allocation", ["marginal", "uniform"])
def test_the_target_holds_over_a_template_and_marginal_allocation_costs_least(allocation):
    pairs = [make_low_rank_pair(2, 64, 16, rank=r, noise=n, seed=s)
             for s, (r, n) in enumerate([(2, 0.01), (6, 0.1), (12, 0.3), (3, 0.0)])]
    target = 0.01
    payloads = encode_shards(pairs, level(target, allocation=allocation))
    errors = [attention_error(p, decode_shard(x)) for p, x in zip(pairs, payloads)]
    assert np.sqrt(np.mean(np.square(errors))) <= target * 1.001
    if allocation == "marginal":
        uniform = encode_shards(pairs, level(target, allocation="uniform"))
        assert sum(map(len, payloads)) <= sum(map(len, uniform))


def test_levels_encoded_together_are_the_levels_encoded_one_by_one():
    """The builder encodes a template's levels in one call that shares each unit's ladder between
    levels that fit alike; every payload must be the one a level alone would have made."""
    pairs = [make_low_rank_pair(2, 64, 16, rank=r, noise=n, seed=s) for s, (r, n) in enumerate([(3, 0.02), (8, 0.2)])]
    scores = [np.random.default_rng(s).random((2, 64)).astype(np.float32) for s in range(2)]
    levels = [v1_levels()["compact"], LevelSpec(name="coarse", transform=TransformSpec(target=0.05)),
              LevelSpec(name="fine", transform=TransformSpec(target=0.002)),
              LevelSpec(name="flat", transform=TransformSpec(target=0.01, weighted=False)),
              LevelSpec(name="flat-z3", zstd_level=3, transform=TransformSpec(target=0.01, weighted=False)),
              LevelSpec(name="full", lossless=True)]
    together = encode_levels(pairs, levels, scores)
    assert list(together) == [lv.name for lv in levels]
    for lv in levels:
        assert together[lv.name] == encode_shards(pairs, lv, scores), lv.name
    assert together["coarse"] != together["fine"] and together["flat"] != together["fine"]


def test_a_weighted_fit_reconstructs_the_weighted_tokens_better():
    pair = make_low_rank_pair(2, 96, 16, rank=10, noise=0.2, seed=5)
    x = joint(pair.k)
    weights = np.where(np.arange(96) < 16, 50.0, 1.0)
    step = 0.5 * fit(x).rms
    errors = {}
    for name, w in (("unweighted", None), ("weighted", weights)):
        code = quantise(fit(x, w), step)
        errors[name] = np.abs(code.factors().dense() - x)[:16].mean()
    assert errors["weighted"] < errors["unweighted"]


@pytest.mark.parametrize("make", [lambda: make_low_rank_pair(4, 64, 8, rank=2, noise=0.01),
                                  lambda: make_pair(2, 16, 4, seed=7)], ids=["low-rank", "full-rank"])
def test_factors_rebuild_exactly_what_the_decoder_rebuilds(make):
    pair = make()
    payload = encode_shard(pair, default_levels()["compact"])
    factors = decode_shard(payload, factored=True)
    assert isinstance(factors, FactoredPair) and factors.shape == pair.k.shape
    dense = decode_shard(payload)
    rebuilt = factors.dense()
    assert rebuilt.k.tobytes() == dense.k.tobytes() and rebuilt.v.tobytes() == dense.v.tobytes()


def test_v1_payloads_decode_to_k_and_v_even_when_factors_are_asked_for():
    pair = make_pair(2, 8, 4)
    out = decode_shard(encode_shard(pair, v1_levels()["medium"]), factored=True)
    assert isinstance(out, KVPair) and out.k.shape == pair.k.shape


def test_a_transform_level_is_data_and_validated():
    (spec,) = [LevelSpec.model_validate({"name": "lean", "transform": {"target": 0.05, "weighted": False}})]
    assert spec.format == 2 and spec.transform is not None and not spec.transform.weighted
    for bad in ({"name": "x", "transform": {"target": 0}}, {"name": "x", "transform": {"target": 0.1, "kind": "dct"}},
                {"name": "x", "lossless": True, "transform": {"target": 0.1}},
                {"name": "x", "transform": {"target": 0.1}, "classes": [{"fraction": 1.0, "bits": 4}]}):
        with pytest.raises(ValueError):
            LevelSpec.model_validate(bad)
