"""A caller that knows its model bounds the decoder: shape, dtype and output size are checked on
the header before any section is decompressed, and downloads are bounded by the largest valid
payload of a shape, never by a length a server sends."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sakura.platform.codec import container, decode_shard, default_levels, encode_shard, max_payload_bytes, v1_levels
from sakura.platform.errors import CodecError
from tests.hypothesis_seed import name_the_seed, per_run_seed
from tests.unit.platform.codec.conftest import make_pair

#: Every level a build may produce, of either wire format.
LEVELS = {f"{lv.name}-v{lv.format}": lv for lv in (*v1_levels().values(), *default_levels().values())}


@pytest.mark.parametrize("level", sorted(LEVELS))
@pytest.mark.parametrize("expect,message", [
    (dict(expected_shape=(2, 8, 8)), "shape"),
    (dict(expected_dtype=np.float32), "dtype"),
    (dict(max_output_bytes=2 * 2 * 8 * 4 * 2 - 1), "budget"),
])
def test_a_payload_the_caller_does_not_expect_is_refused_before_decompressing(level, expect, message, monkeypatch):
    payload = encode_shard(make_pair(2, 8, 4), LEVELS[level])
    decompressed = []
    monkeypatch.setattr(container, "decompress", lambda *a: decompressed.append(a) or b"")
    with pytest.raises(CodecError, match=message):
        decode_shard(payload, **expect)
    assert decompressed == []


def test_a_payload_within_every_expectation_decodes():
    pair = make_pair(2, 8, 4)
    got = decode_shard(encode_shard(pair, LEVELS["full-v1"]), expected_shape=(2, 8, 4), expected_dtype=np.float16,
                       max_output_bytes=pair.nbytes)
    np.testing.assert_array_equal(got.k, pair.k)


@per_run_seed
@settings(max_examples=40, deadline=None)
@given(
    heads=st.integers(1, 4),
    tokens=st.integers(1, 40),
    dim=st.sampled_from([1, 3, 8, 16]),
    dtype=st.sampled_from([np.float16, np.float32]),
    seed=st.integers(0, 2**16),
    level=st.sampled_from(sorted(LEVELS)),
)
def test_no_payload_is_larger_than_the_bound_for_its_shape(heads, tokens, dim, dtype, seed, level):
    name_the_seed()
    rng = np.random.default_rng(seed)
    k = (rng.standard_cauchy((heads, tokens, dim)) * 1e3).clip(-6e4, 6e4).astype(dtype)  # incompressible, heavy tails
    v = rng.standard_normal((heads, tokens, dim)).astype(dtype)
    from sakura.platform.kv import KVPair

    payload = encode_shard(KVPair(k, v), LEVELS[level])
    assert len(payload) <= max_payload_bytes((heads, tokens, dim), np.dtype(dtype))
