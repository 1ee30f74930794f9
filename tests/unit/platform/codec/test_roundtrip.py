from __future__ import annotations

import numpy as np
import pytest

from sakura.platform.codec import decode_shard, default_levels, encode_shard, parse_levels, peek_header, v1_levels
from sakura.platform.errors import CodecError
from sakura.platform.kv import KVPair
from tests.unit.platform.codec.conftest import make_pair

#: The class levels of wire format v1 (transform levels have tests of their own: test_transform.py).
LEVELS = v1_levels()
#: Every level a build may produce, of either format.
EVERY_LEVEL = [*v1_levels().values(), *default_levels().values()]


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_full_is_bit_exact(dtype):
    pair = make_pair(dtype=dtype)
    out = decode_shard(encode_shard(pair, LEVELS["full"]))
    assert out.k.dtype == dtype and out.v.dtype == dtype
    assert out.k.tobytes() == pair.k.tobytes() and out.v.tobytes() == pair.v.tobytes()


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_lossy_levels_round_trip_with_ordered_error_and_size(dtype):
    pair = make_pair(dtype=dtype, tokens=256, dim=32)
    sizes, errs = {}, {}
    for name in ("compact", "medium"):
        payload = encode_shard(pair, LEVELS[name])
        out = decode_shard(payload, expected_shape=pair.k.shape)
        assert out.k.shape == pair.k.shape and out.k.dtype == dtype
        sizes[name], errs[name] = len(payload), rel_err(out.k, pair.k) + rel_err(out.v, pair.v)
        assert peek_header(payload).level == name
    assert sizes["compact"] < sizes["medium"] < pair.nbytes / 2.5
    assert errs["medium"] < errs["compact"] < 2 * 0.45  # K and V errors summed
    assert errs["medium"] < 2 * 0.1


def test_important_rows_keep_more_precision(pair):
    scores = np.random.default_rng(3).random(pair.k.shape[:2])
    out = decode_shard(encode_shard(pair, LEVELS["compact"], scores))
    row_err = np.abs(out.v.astype(np.float32) - pair.v.astype(np.float32)).mean(axis=-1)
    top = scores >= np.quantile(scores, 0.9, axis=1, keepdims=True)
    assert row_err[top].mean() < 0.5 * row_err[~top].mean()


def test_non_power_of_two_head_dim_and_degenerate_shapes():
    for heads, tokens, dim in [(3, 7, 12), (1, 1, 1), (2, 5, 3)]:
        pair = make_pair(heads, tokens, dim)
        for level in EVERY_LEVEL:
            out = decode_shard(encode_shard(pair, level))
            assert out.k.shape == (heads, tokens, dim)
            assert np.isfinite(out.k).all() and np.isfinite(out.v).all()


@pytest.mark.parametrize("level", EVERY_LEVEL, ids=lambda lv: f"{lv.name}-v{lv.format}")
def test_constant_values_survive(level):
    const = np.full((2, 10, 8), 1.5, np.float16)
    out = decode_shard(encode_shard(KVPair(const, const.copy()), level))
    np.testing.assert_allclose(out.k.astype(np.float32), 1.5, atol=1e-3)


def test_a_new_level_is_data_not_code(pair):
    classes = [{"fraction": 0.05, "bits": 3}, {"fraction": 0.95, "bits": 1.5}]
    (ultra,) = parse_levels([{"name": "ultra", "classes": classes}]).values()
    payload = encode_shard(pair, ultra)
    assert len(payload) < len(encode_shard(pair, LEVELS["compact"]))
    assert decode_shard(payload).k.shape == pair.k.shape


@pytest.mark.parametrize(
    "raw, field",
    [
        ({"name": "x", "classes": [{"fraction": 0.5, "bits": 4}]}, "must sum to 1"),
        ({"name": "x", "classes": [{"fraction": 1.0, "bits": 17}]}, "classes"),
        ({"name": "x", "lossless": True, "classes": [{"fraction": 1.0, "bits": 4}]}, "no precision classes"),
        ({"name": "Bad Name", "lossless": True}, "name"),
        ({"name": "x"}, "needs 1 to"),
        ({"name": "x", "lossless": True, "colour": 1}, "colour"),
    ],
)
def test_invalid_levels_are_rejected(raw, field):
    with pytest.raises(CodecError, match=field):
        parse_levels([raw])


def test_duplicate_level_names_are_rejected():
    with pytest.raises(CodecError, match="duplicate"):
        parse_levels([{"name": "a", "lossless": True}, {"name": "a", "lossless": True}])


@pytest.mark.parametrize("medium", [v1_levels()["medium"], default_levels()["medium"]], ids=["v1", "v2"])
def test_encoder_rejects_bad_input(pair, medium):
    with pytest.raises(CodecError, match="dtype"):
        encode_shard(KVPair(pair.k.astype(np.int16), pair.v.astype(np.int16)), LEVELS["full"])
    with pytest.raises(CodecError, match="dtype"):
        encode_shard(KVPair(pair.k.astype(np.float64), pair.v.astype(np.float64)), medium)
    bad = pair.k.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(CodecError, match="non-finite"):
        encode_shard(KVPair(bad, pair.v), medium)
    with pytest.raises(CodecError, match="importance has shape"):
        encode_shard(pair, medium, np.ones((1, 2)))


def test_expected_shape_is_enforced(pair):
    with pytest.raises(CodecError, match="expected"):
        decode_shard(encode_shard(pair, LEVELS["full"]), expected_shape=(4, 48, 8))
