"""Context objects round-trip exactly, and decoding never allocates past the declared shape."""

from __future__ import annotations

import numpy as np
import pytest

from sakura.platform.context import ContextError, decode_context, encode_context, max_encoded_bytes


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
