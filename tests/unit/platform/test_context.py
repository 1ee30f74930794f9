"""Context objects round-trip exactly, and decoding never allocates past the declared shape."""

from __future__ import annotations

import numpy as np
import pytest

from sakura.platform.context import (
    LOWRANK,
    ContextError,
    code_within_parity,
    decode_context,
    encode_coded,
    encode_context,
    max_encoded_bytes,
)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_round_trip_and_the_encoded_size_bound(dtype):
    array = np.random.default_rng(0).standard_normal((17, 9)).astype(dtype)
    data, shape, name = encode_context(array)
    assert shape == (17, 9) and name == np.dtype(dtype).name and len(data) <= max_encoded_bytes(shape, name)
    np.testing.assert_array_equal(decode_context(data, shape, name), array)


def test_a_payload_larger_than_its_shape_is_refused_without_decoding_it_all():
    bomb, _, _ = encode_context(np.zeros((4096, 4096), np.float32))  # 64 MB of zeros, a few kB on the wire
    with pytest.raises(ContextError, match="needs 1024"):
        decode_context(bomb, (16, 16), "float32")


@pytest.mark.parametrize("bad", [b"", b"not zstd at all"])
def test_malformed_payloads_are_typed_errors(bad):
    with pytest.raises(ContextError):
        decode_context(bad, (2, 2), "float32")


def test_non_finite_values_are_refused():
    import zstandard

    nan = zstandard.ZstdCompressor().compress(np.full((2, 2), np.nan, np.float32).tobytes())
    with pytest.raises(ContextError, match="non-finite"):
        decode_context(nan, (2, 2), "float32")


def test_non_float_or_non_finite_arrays_are_not_context_objects():
    for array in (np.zeros((2, 2), np.int32), np.full((2,), np.inf, np.float32), np.zeros((1,) * 5, np.float32)):
        with pytest.raises(ContextError):
            encode_context(array)


def _low_rank(rows: int = 64, cols: int = 48, rank: int = 3, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, rank)) @ rng.standard_normal((rank, cols)) + rng.standard_normal(cols)
            ).astype(np.float32)


def test_a_coded_context_object_round_trips_within_its_step_and_is_bounded():
    array = _low_rank()
    data = encode_coded(array, 1e-3)
    out = decode_context(data, array.shape, "float32", LOWRANK)
    assert out.shape == array.shape and out.dtype == np.float32
    assert np.abs(out - array).max() < 1e-2
    assert len(data) <= max_encoded_bytes(array.shape, "float32", LOWRANK)
    assert len(data) < len(encode_context(array)[0]) / 3  # rank 3 of 48: a fraction of its zstd bytes


def test_the_coarsest_coding_the_edit_accepts_is_shipped_and_none_where_it_accepts_none():
    array = _low_rank(seed=1)
    seen = []

    def within(decoded: np.ndarray) -> bool:
        seen.append(float(np.abs(decoded - array).max()))
        return seen[-1] <= 1e-3

    data = code_within_parity(array, within)
    assert data is not None and np.abs(decode_context(data, array.shape, "float32", LOWRANK) - array).max() <= 1e-3
    assert len(seen) <= 6  # bisection over the ladder, not a scan
    assert code_within_parity(array, lambda decoded: False) is None
    assert code_within_parity(np.ones(7, np.float32), lambda decoded: True) is None  # only 2-D arrays are coded


def test_a_coded_object_that_is_not_what_the_manifest_says_is_refused():
    array = _low_rank()
    data = encode_coded(array, 1e-3)
    with pytest.raises(ContextError, match="shape"):
        decode_context(data, (64, 47), "float32", LOWRANK)
    with pytest.raises(ContextError, match="dtype"):
        decode_context(data, array.shape, "float16", LOWRANK)
    with pytest.raises(ContextError):
        decode_context(data[:-5], array.shape, "float32", LOWRANK)
    with pytest.raises(ContextError, match="2-D"):
        decode_context(data, (64, 48, 1), "float32", LOWRANK)
    with pytest.raises(ContextError, match="encoding"):
        decode_context(data, array.shape, "float32", "brotli")
