"""Context objects: what a template ships besides its KV, so the phone needs no text encoder.

A model computes them once in the cloud (``ModelAdapter.template_context``: e.g. the template
prompt's embeddings) and the phone hands them to replay. Each is a float array listed in the
manifest with its name, shape, dtype, length, sha256 and encoding, like a shard:

* ``zstd``: its little-endian bytes, zstd-compressed (lossless);
* ``lowrank``: a 2-D array coded like a shard's tensor by the transform codec (mean + basis +
  coefficients, wire format v2 with the array as K and an empty V), at the coarsest step whose
  edit stays within the parity tolerance (:func:`code_within_parity`: the build checks it).

Decoding never allocates more than the shape the caller checked against its model.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Literal

import numpy as np
import zstandard

from sakura.platform.codec import decode_shard, max_payload_bytes
from sakura.platform.codec.container import SECTION, compress
from sakura.platform.codec.format_v2 import LowRankHeader, TensorHeader, write_payload
from sakura.platform.codec.lowrank import TensorCode, fit, quantise
from sakura.platform.codec.transform import LADDER
from sakura.platform.errors import CodecError, SakuraError, shown

CONTEXT_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,31}$"
ContextDtype = Literal["float32", "float16"]
DTYPES: tuple[ContextDtype, ...] = ("float32", "float16")
#: How a context object's bytes encode its array.
Encoding = Literal["zstd", "lowrank"]
ZSTD: Encoding = "zstd"
LOWRANK: Encoding = "lowrank"
#: The level name a coded context object's payload carries.
_CONTEXT_LEVEL = "context"


class ContextError(SakuraError, ValueError):
    code = "invalid_context"


def encode_context(array: np.ndarray) -> tuple[bytes, tuple[int, ...], ContextDtype]:
    """(compressed bytes, shape, dtype name) of a float array."""
    array = np.asarray(array)
    if array.dtype.name not in DTYPES or not 1 <= array.ndim <= 4 or not np.isfinite(array).all():
        raise ContextError("a context object is a finite float32/float16 array of 1-4 dims, "
                           f"not {array.dtype} {array.shape}")
    raw = np.ascontiguousarray(array.astype(array.dtype.newbyteorder("<"))).tobytes()
    dtype: ContextDtype = "float32" if array.dtype.name == "float32" else "float16"
    return zstandard.ZstdCompressor(level=9, write_content_size=True).compress(raw), tuple(array.shape), dtype


def max_encoded_bytes(shape: tuple[int, ...], dtype: str, encoding: str = ZSTD) -> int:
    """The largest valid encoding of such an array (zstd's compress bound plus its frame header; a
    coded one: the largest version 2 payload of its shape)."""
    if encoding == LOWRANK and len(shape) == 2:
        return max_payload_bytes((1, *shape), np.dtype(dtype))
    size = math.prod(shape) * np.dtype(dtype).itemsize  # not np.prod: int64 wraps to 0 at 2**64
    return size + (size >> 8) + ((((128 << 10) - size) >> 11) if size < (128 << 10) else 0) + 18


def decode_context(data: bytes, shape: tuple[int, ...], dtype: str, encoding: str = ZSTD) -> np.ndarray:
    """The array, or a :class:`ContextError`; at most ``shape``'s bytes are ever allocated."""
    if dtype not in DTYPES:
        raise ContextError(f"unsupported context dtype {dtype!r}")
    if encoding == LOWRANK:
        return _decode_coded(data, shape, dtype)
    if encoding != ZSTD:
        raise ContextError(f"unknown context encoding {encoding!r}")
    size = math.prod(shape) * np.dtype(dtype).itemsize
    if not 1 <= len(shape) <= 4 or min(shape) < 1 or size >= sys.maxsize:
        raise ContextError(f"a context object is an array of 1-4 positive dims, not {shown(tuple(shape))}")
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=False)
        raw = reader.read(size + 1)
    except zstandard.ZstdError as exc:
        raise ContextError(f"context object is not valid zstd: {exc}") from None
    if len(raw) != size:
        raise ContextError(f"context object decodes to {len(raw)} bytes, its shape {tuple(shape)} needs {size}")
    array = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape).astype(dtype)
    if not np.isfinite(array).all():
        raise ContextError("context object has non-finite values")
    return array


def _decode_coded(data: bytes, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if len(shape) != 2:
        raise ContextError(f"a coded context object is 2-D, not {tuple(shape)}")
    try:
        pair = decode_shard(data, expected_shape=(1, *shape), expected_dtype=np.dtype(dtype))
    except CodecError as exc:
        raise ContextError(f"coded context object: {exc}") from None
    return np.ascontiguousarray(pair.k[0])


def encode_coded(array: np.ndarray, step: float) -> bytes:
    """A 2-D array coded as the K of a version 2 payload at ``step`` (V empty: rank 0, zero mean)."""
    code = quantise(fit(np.asarray(array, dtype=np.float64)), step)
    empty = TensorCode(1.0, 1.0, np.zeros(array.shape[1], np.int32), np.zeros((array.shape[0], 0), np.int32),
                       np.zeros(0, np.float32), np.zeros((0, array.shape[1]), np.int32))
    header = LowRankHeader(np.dtype(array.dtype), 1, array.shape[0], array.shape[1], _CONTEXT_LEVEL,
                           (code.header, TensorHeader(True, 0, 1.0, 1.0)))
    frames = [(len(raw), compress(raw, 9)) for c in (code, empty) for raw in c.raw_sections()]
    return write_payload(header, frames)


def code_within_parity(array: np.ndarray, within: Callable[[np.ndarray], bool]) -> bytes | None:
    """The coarsest transform coding of a 2-D ``array`` that ``within`` accepts (given the array as
    the phone decodes it, whether the edit stays within the parity tolerance), found by bisection
    over the transform ladder; None where the finest is not accepted or codes no smaller than zstd."""
    array = np.asarray(array)
    if array.ndim != 2 or array.dtype.name not in DTYPES:
        return None
    scale = float(np.sqrt(((array - array.mean(axis=0)) ** 2).mean())) or float(np.abs(array).max()) or 1.0
    decoded: dict[int, tuple[bytes, bool]] = {}

    def accepted(rung: int) -> bool:
        if rung not in decoded:
            data = encode_coded(array, LADDER[rung] * scale)
            decoded[rung] = (data, within(decode_context(data, array.shape, array.dtype.name, LOWRANK)))
        return decoded[rung][1]

    coarse, fine = 0, len(LADDER) - 1
    if not accepted(fine):
        return None
    while coarse < fine:  # the error grows with the step: the first accepted rung, coarse to fine
        middle = (coarse + fine) // 2
        if accepted(middle):
            fine = middle
        else:
            coarse = middle + 1
    data = decoded[fine][0]
    return data if len(data) + SECTION.size < len(encode_context(array)[0]) else None
