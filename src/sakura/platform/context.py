"""Context objects: what a template ships besides its KV, so the phone needs no text encoder.

A model computes them once in the cloud (``ModelAdapter.template_context``: e.g. the template
prompt's embeddings) and the phone hands them to replay. Each is a float array stored as
zstd-compressed little-endian bytes and listed in the manifest with its name, shape, dtype,
length and sha256, like a shard. Decoding never allocates more than the shape the caller
checked against its model.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import zstandard

from sakura.platform.errors import SakuraError

CONTEXT_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,31}$"
ContextDtype = Literal["float32", "float16"]
DTYPES: tuple[ContextDtype, ...] = ("float32", "float16")


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


def max_encoded_bytes(shape: tuple[int, ...], dtype: str) -> int:
    """The largest valid encoding of such an array (zstd's compress bound plus its frame header)."""
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    return size + (size >> 8) + ((((128 << 10) - size) >> 11) if size < (128 << 10) else 0) + 18


def decode_context(data: bytes, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """The array, or a :class:`ContextError`; at most ``shape``'s bytes are ever allocated."""
    if dtype not in DTYPES:
        raise ContextError(f"unsupported context dtype {dtype!r}")
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
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
