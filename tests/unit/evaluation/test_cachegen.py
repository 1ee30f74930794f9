"""CacheGen as its published encoder (LMCache's serde) sizes and reconstructs KV, and its adaptation rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sakura.evaluation.cachegen import (
    CACHEGEN_LEVELS,
    CacheGenStyle,
    code_bits,
    quantise,
    select_config,
    shipped_cdf,
    stream_bytes,
)
from sakura.platform.kv import KVPair, ShardKey

LAYER0 = ShardKey(step=None, layer=0)
SIXTEEN = CacheGenStyle("sixteen", key_bins=(16, 16, 16), value_bins=(16, 16))


def range_coder_bytes(symbols: np.ndarray, cdf: np.ndarray) -> int:
    """Length of one stream as a 32-bit range coder with 16-bit CDF precision writes it (the scheme of
    LMCache's ``ac_enc.cu``): one bit per renormalising shift, pending bits for straddles, a flush."""
    mask, low, high, pending, bits = 0xFFFFFFFF, 0, 0xFFFFFFFF, 0, 0
    for s in map(int, symbols):
        span = high - low + 1
        c_high = 1 << 16 if s == len(cdf) - 2 else int(cdf[s + 1])
        high = (low - 1 + ((span * c_high) >> 16)) & mask
        low = (low + ((span * int(cdf[s])) >> 16)) & mask
        while True:
            if high < 0x80000000 or low >= 0x80000000:
                bits, pending = bits + 1 + pending, 0
                low, high = (low << 1) & mask, ((high << 1) | 1) & mask
            elif low >= 0x40000000 and high < 0xC0000000:
                pending += 1
                low, high = (low << 1) & 0x7FFFFFFF, ((high << 1) | 0x80000001) & mask
            else:
                break
    return math.ceil((bits + pending + 2) / 8)


def realistic_pair(rng: np.random.Generator, tokens: int = 256, heads: int = 4, dim: int = 32) -> KVPair:
    """Gaussian KV whose channels differ in scale by two orders of magnitude, with a few outlier channels."""
    scale = np.exp(rng.normal(0.0, 1.0, size=(heads, 1, dim)))
    k = rng.normal(size=(heads, tokens, dim)) * scale
    v = rng.normal(size=(heads, tokens, dim)) * scale[:, :, ::-1] + 0.3 * np.sin(np.arange(tokens))[None, :, None]
    return KVPair(k.astype(np.float32), v.astype(np.float32))


def test_a_hand_computed_shard():
    # one head, four tokens, two channels; every token's absmax is 1, so with 16 bins (C = 7) the
    # symbols are x * 7 + 7: channel 0 is 14, 14, 14, 7 and channel 1 is 7, 7, 7, 0
    x = np.array([[[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, -1.0]]], np.float32)
    symbols, maxes = quantise(x[0], 16)
    assert symbols.T.tolist() == [[14, 14, 14, 7], [7, 7, 7, 0]] and maxes.ravel().tolist() == [1, 1, 1, 1]
    # calculate_cdf: floor((0xFFFF - 16) * #(s < k) / 4) + k for k = 0..16
    cdf = shipped_cdf(symbols, 16)
    assert cdf[0].tolist() == list(range(8)) + [16379 + k for k in range(8, 15)] + [65534, 65535]
    assert cdf[1].tolist() == [0] + [16379 + k for k in range(1, 8)] + [65519 + k for k in range(8, 17)]
    # symbol 7 (resp. 0) gets width 16387 - 7 = 16380, symbol 14 (resp. 7) 65534 - 16393 = 49141
    bits = code_bits(cdf)
    per_channel = 4 * 16 - math.log2(16380) - 3 * math.log2(49141)
    assert bits[0, symbols[:, 0]].sum() == pytest.approx(per_channel)
    assert bits[1, symbols[:, 1]].sum() == pytest.approx(per_channel)
    assert stream_bytes(symbols, cdf) == 2 * math.ceil((per_channel + 2) / 8) == 2
    # per tensor: CDF 2 channels x 17 int16, 4 fp16 maxes, 2 int32 lengths, 2 one-byte streams
    size = SIXTEEN.breakdown(KVPair(x, x.copy()), LAYER0, 1)
    assert (size.cdf, size.maxes, size.lengths, size.streams) == (2 * 68, 2 * 8, 2 * 8, 2 * 2)
    rt = SIXTEEN.roundtrip(KVPair(x, x.copy()), LAYER0, np.ones(1), 1)
    assert rt.nbytes == 172 and np.array_equal(rt.pair.k, x) and np.array_equal(rt.pair.v, x)


def test_the_stream_model_is_what_a_range_coder_writes():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(256, 12)) * np.linspace(0.2, 3.0, 12)
    for bins in (12, 16, 32):
        symbols, _ = quantise(x.astype(np.float32), bins)
        cdf = shipped_cdf(symbols, 32)
        for c in range(symbols.shape[1]):
            model = stream_bytes(symbols[:, [c]], cdf[[c]])
            assert abs(model - range_coder_bytes(symbols[:, c], cdf[c])) <= 1, (bins, c)


def test_tables_are_charged_per_layer_channel_chunk():
    rng = np.random.default_rng(0)
    level = CACHEGEN_LEVELS[-1]
    fractions = []
    for tokens in (256, 1024):
        size = level.breakdown(realistic_pair(rng, tokens), LAYER0, 6)
        assert size.cdf == 2 * 128 * 33 * 2  # K and V, 4 x 32 channels, 33 int16 each: once per chunk
        assert size.lengths == 2 * 128 * (tokens // 256) * 4 and size.maxes == 2 * tokens * 2
        fractions.append(size.cdf / size.total)
    assert fractions[1] < fractions[0] / 2  # the same table over four times the tokens


def test_finer_configurations_are_larger_and_more_faithful():
    rng = np.random.default_rng(1)
    pairs = [realistic_pair(rng) for _ in range(6)]
    sizes, errors = [], []
    for level in CACHEGEN_LEVELS:
        trips = [level.roundtrip(p, ShardKey(step=None, layer=i), np.ones(1), 6) for i, p in enumerate(pairs)]
        sizes.append(sum(t.nbytes for t in trips))
        errors.append(np.mean([np.linalg.norm(t.pair.k - p.k) / np.linalg.norm(p.k) for t, p in zip(trips, pairs)]
                              + [np.linalg.norm(t.pair.v - p.v) / np.linalg.norm(p.v) for t, p in zip(trips, pairs)]))
    assert sizes == sorted(sizes) and len(set(sizes)) == 3
    assert errors == sorted(errors, reverse=True) and len(set(errors)) == 3
    assert sizes[-1] < sum(p.k.size * 2 * 2 for p in pairs)  # smaller than fp16


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_decode_keeps_shape_and_dtype_and_the_quantisers_error_bound(dtype):
    rng = np.random.default_rng(2)
    pair = realistic_pair(rng, tokens=300, heads=2, dim=8)
    k = pair.k.astype(dtype)
    k[:, 7] = 0  # an all-zero token decodes to zeros, not NaN
    pair = KVPair(k, pair.v.astype(dtype))
    rt = CACHEGEN_LEVELS[0].roundtrip(pair, LAYER0, np.ones(1), 6)
    assert rt.pair.k.shape == pair.k.shape and rt.pair.k.dtype == dtype and rt.pair.v.dtype == dtype
    assert np.all(rt.pair.k[:, 7] == 0) and np.isfinite(rt.pair.k).all()
    # layer 0 of 6 has 16 bins for keys: a step of max/7, so at most max/14 off (plus fp16 rounding)
    absmax = np.abs(pair.k.astype(np.float32)).max(axis=(0, 2))
    err = np.abs(rt.pair.k.astype(np.float32) - pair.k.astype(np.float32)).max(axis=(0, 2))
    assert np.all(err <= absmax / 14 * 1.01 + 1e-3)


def test_layer_groups_follow_the_published_configurations():
    low, coarse, fine = CACHEGEN_LEVELS
    assert [c.name for c in CACHEGEN_LEVELS] == ["cachegen-low", "cachegen-coarse", "cachegen-fine"]
    # 32 layers as published: keys 0-9 / 10-19 / 20-31, values 0-1 / 2-31
    assert [coarse.bins(layer, 32) for layer in (0, 1, 2, 9, 10, 19, 20, 31)] == (
        [(32, 32), (32, 32), (32, 16), (32, 16), (16, 16), (16, 16), (16, 16), (16, 16)])
    assert [low.bins(layer, 32) for layer in (0, 2, 19, 20)] == [(16, 16), (16, 12), (16, 12), (12, 12)]
    assert {fine.bins(layer, 32) for layer in range(32)} == {(32, 32)}
    # scaled to 6 layers: keys 0-1 / 2-3 / 4-5, values 0 / 1-5
    assert [coarse.bins(layer, 6) for layer in range(6)] == [(32, 32), (32, 16)] + [(16, 16)] * 4


def test_select_config_takes_the_finest_configuration_that_fits_the_chunk_budget():
    ladder = ("low", "coarse", "fine")
    sizes = {"low": 100, "coarse": 200, "fine": 400}
    assert select_config(sizes, 1000.0, 0.5, ladder) == "fine"
    assert select_config(sizes, 1000.0, 0.3, ladder) == "coarse"
    assert select_config(sizes, 1000.0, 0.15, ladder) == "low"
    assert select_config(sizes, 1000.0, 0.05, ladder) is None  # text fallback: recompute the chunk
    assert select_config(sizes, 1000.0, 0.5, ("low", "coarse")) == "coarse"  # only the ladder given


def test_select_config_needs_strictly_less_than_the_budget():
    sizes = {"low": 100, "coarse": 200, "fine": 400}
    assert select_config(sizes, 1000.0, 0.4, ("low", "coarse", "fine")) == "coarse"
    assert select_config(sizes, 1000.0, 0.1, ("low", "coarse", "fine")) is None
    assert select_config(sizes, 1000.0, 0.4000001, ("low", "coarse", "fine")) == "fine"
