"""Context and source objects under attack (issue 36, item 5.1): whatever bytes, shape, dtype and
encoding reach :func:`decode_context`, it answers the array of exactly that shape and dtype, finite,
or a :class:`ContextError`; and it never allocates much past the shape's bytes, whatever the bytes
declare (the caller has checked the shape against its model). The cases differ from run to run
(``tests/hypothesis_seed.py``)."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sakura.platform.context import (
    LOWRANK,
    ZSTD,
    ContextError,
    decode_context,
    encode_coded,
    encode_context,
    max_encoded_bytes,
)
from tests.hypothesis_seed import name_the_seed, per_run_seed

FUZZ = settings(max_examples=300, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
_RNG = np.random.default_rng(0)
ARRAY = _RNG.standard_normal((24, 8)).astype(np.float32)
GENUINE = {ZSTD: encode_context(ARRAY)[0], LOWRANK: encode_coded(ARRAY, 1e-2)}
#: Shapes as an entry may list them: small, and a few past any model (2**64 elements, 2**70 bytes).
SHAPES = st.one_of(
    st.lists(st.integers(1, 40), min_size=1, max_size=4).map(tuple),
    st.sampled_from([(24, 8), (8, 24), (24, 8, 1), (1 << 32, 1 << 32), (1 << 31, 1 << 31, 4), (1 << 62, 4),
                     (), (0, 8), (-1, 8), (1,) * 5]),
)
DTYPES = st.sampled_from(["float32", "float16", "float64", "int32", "object", "", "<f4"])
ENCODINGS = st.sampled_from([ZSTD, LOWRANK, "brotli", ""])


def _decodes_or_context_error(data: bytes, shape: tuple, dtype: str, encoding: str) -> None:
    tracemalloc.start()
    try:
        array = decode_context(data, shape, dtype, encoding)
    except ContextError:
        return
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert array.shape == shape and array.dtype == np.dtype(dtype) and np.isfinite(array).all()
    assert peak < 8 * array.nbytes + (4 << 20)


@per_run_seed
@FUZZ
@given(data=st.binary(max_size=400), shape=SHAPES, dtype=DTYPES, encoding=ENCODINGS, magic=st.booleans())
def test_any_bytes_shape_dtype_and_encoding_decode_exactly_or_are_a_context_error(data, shape, dtype, encoding, magic):
    name_the_seed()
    if magic:  # past the first check of either encoding
        data = (b"\x28\xb5\x2f\xfd" if encoding == ZSTD else b"SKKV\x02\x00") + data
    _decodes_or_context_error(data, shape, dtype, encoding)


@per_run_seed
@FUZZ
@given(encoding=st.sampled_from([ZSTD, LOWRANK]), shape=SHAPES, dtype=st.sampled_from(["float32", "float16"]),
       edits=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255), st.sampled_from(["set", "cut", "add"])),
                      min_size=1, max_size=4))
def test_a_damaged_genuine_object_decodes_exactly_or_is_a_context_error(encoding, shape, dtype, edits):
    name_the_seed()
    data = bytearray(GENUINE[encoding])
    for at, byte, action in edits:
        at %= len(data) + 1
        if action == "set" and at < len(data):
            data[at] = byte
        elif action == "cut":
            del data[at:]
        else:
            data[at:at] = bytes([byte])
        if not data:
            break
    _decodes_or_context_error(bytes(data), shape, dtype, encoding)


@pytest.mark.parametrize("shape", [(1 << 32, 1 << 32), (1 << 31, 1 << 31, 4), (1 << 62, 4), (0, 4), (), (1,) * 5])
def test_a_shape_no_array_can_have_is_a_context_error_not_a_wrapped_size(shape):
    """2**64 elements wrapped to 0 in numpy's int64 product: an empty frame then passed its size check."""
    empty = zstandard.ZstdCompressor(write_content_size=True).compress(b"")
    with pytest.raises(ContextError):
        decode_context(empty, shape, "float32")
    if len(shape) and min(shape) > 0:  # the length bound grows with the shape, never wraps
        assert max_encoded_bytes(shape, "float32") >= math.prod(shape) * 4


def test_a_frame_declaring_far_more_than_its_shape_is_read_no_further():
    bomb = zstandard.ZstdCompressor(write_content_size=True).compress(bytes(64 << 20))
    tracemalloc.start()
    try:
        with pytest.raises(ContextError, match="decodes to 1025 bytes"):
            decode_context(bomb, (16, 16), "float32")
        assert tracemalloc.get_traced_memory()[1] < 1 << 20
    finally:
        tracemalloc.stop()
