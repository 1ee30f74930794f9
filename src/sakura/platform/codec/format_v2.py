"""Shard wire format version 2: each of K and V as a low-rank transform (little-endian).

```
header   the container's header with version 2, kind 2, flags 0, n_classes 0, kappa 0
name     name_len bytes of ASCII (the level name)
tensors  K, then V: basis u8 (1: stored, 0: the identity) | 3 zero bytes | rank u32
         | mean_step f32 | coef_step f32
sections count u8, then the container's sections; trailer sha256
```

A tensor is the shard's keys (or values) as one ``tokens x width`` matrix, ``width = heads x
head_dim`` (the heads side by side), written ``X = C B + 1 m^T``. Its sections, in order:

* ``?MU``: the mean's codes (width): ``m = codes * mean_step``;
* ``?STP``: f32 step of each basis row (rank), with a stored basis only;
* ``?BAS``: the basis codes (rank x width): ``B[j] = codes[j] * step[j]``, with a stored basis only;
* ``?COE``: the coefficient codes, component by component (rank x tokens): ``C = codes^T * coef_step``.

``?`` is ``K`` or ``V``. Codes are integers as two byte planes (:func:`container.planes_bytes`). With the
identity basis, ``rank = width`` and ``C`` is ``X - m`` itself. Every size derives from the header:
``rank <= min(tokens, width)`` is checked before anything is decompressed.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np

from sakura.platform.codec.container import (
    CHECKSUM_BYTES,
    DTYPE_CODES,
    DTYPES,
    HEADER,
    MAGIC,
    check_dims,
    read_level_name,
    sections_bound,
)
from sakura.platform.codec.container import (
    write_payload as write_frame,
)
from sakura.platform.errors import CodecError

VERSION = 2
KIND_LOWRANK = 2
TENSOR = struct.Struct("<BBBBIff")
TENSORS = (b"K", b"V")


@dataclass(frozen=True)
class TensorHeader:
    """How one of K and V is coded: its rank, whether its basis is stored, and its two steps."""

    basis: bool
    rank: int
    mean_step: float
    coef_step: float


@dataclass(frozen=True)
class LowRankHeader:
    dtype: np.dtype
    heads: int
    tokens: int
    head_dim: int
    level: str
    tensors: tuple[TensorHeader, TensorHeader]  # K, V

    version = VERSION
    kind = KIND_LOWRANK

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.heads, self.tokens, self.head_dim)

    @property
    def width(self) -> int:
        return self.heads * self.head_dim

    @property
    def elements(self) -> int:
        return self.heads * self.tokens * self.head_dim

    def section_sizes(self) -> list[tuple[bytes, int]]:
        """Each expected section's tag and exact decompressed size, derived from the header."""
        out = []
        for name, t in zip(TENSORS, self.tensors):
            out.append((name + b"MU\0", 2 * self.width))
            if t.basis:
                out += [(name + b"STP", 4 * t.rank), (name + b"BAS", 2 * t.rank * self.width)]
            out.append((name + b"COE", 2 * self.tokens * t.rank))
        return out


def write_payload(header: LowRankHeader, frames: list[tuple[int, bytes]]) -> bytes:
    """``frames``: (raw size, zstd frame) of each section, in :meth:`LowRankHeader.section_sizes` order."""
    name = header.level.encode("ascii")
    fixed = HEADER.pack(MAGIC, VERSION, DTYPE_CODES[header.dtype], KIND_LOWRANK, 0, 0, len(name), 0,
                        header.heads, header.tokens, header.head_dim, 0.0)
    tensors = b"".join(TENSOR.pack(int(t.basis), 0, 0, 0, t.rank, t.mean_step, t.coef_step) for t in header.tensors)
    return write_frame(fixed + name + tensors, header.section_sizes(), frames)


def read_header(fields: tuple, body: memoryview) -> tuple[LowRankHeader, int]:
    """The rest of a version 2 header, whose container fields are ``fields``; every field bounded."""
    (_, _, dtype_code, kind, flags, n_classes, name_len, reserved, heads, tokens, head_dim, kappa) = fields
    if dtype_code not in DTYPES:
        raise CodecError(f"unsupported dtype code {dtype_code}")
    if kind != KIND_LOWRANK:
        raise CodecError(f"unknown shard kind {kind} for format version {VERSION}")
    if flags or n_classes or reserved or kappa != 0.0:
        raise CodecError(f"a version {VERSION} header has no flags, classes or kappa")
    check_dims(heads, tokens, head_dim)
    level = read_level_name(body, HEADER.size, name_len)
    offset = HEADER.size + name_len
    end = offset + 2 * TENSOR.size
    if len(body) < end:
        raise CodecError("shard payload is truncated inside the header")
    width = heads * head_dim
    tensors = tuple(_tensor(TENSOR.unpack_from(body, offset + i * TENSOR.size), tokens, width, name)
                    for i, name in enumerate("KV"))
    return LowRankHeader(DTYPES[dtype_code], heads, tokens, head_dim, level, tensors), end  # type: ignore[arg-type]


def _tensor(fields: tuple, tokens: int, width: int, name: str) -> TensorHeader:
    basis, r1, r2, r3, rank, mean_step, coef_step = fields
    if basis not in (0, 1) or r1 or r2 or r3:
        raise CodecError(f"{name}: unknown basis kind {basis} or reserved bytes set")
    if basis and rank > min(tokens, width):
        raise CodecError(f"{name}: rank {rank} exceeds min(tokens, heads x head_dim) = {min(tokens, width)}")
    if not basis and rank != width:
        raise CodecError(f"{name}: an identity basis has rank heads x head_dim = {width}, not {rank}")
    for label, step in (("mean", mean_step), ("coefficient", coef_step)):
        if not (math.isfinite(step) and step > 0.0):
            raise CodecError(f"{name}: {label} step {step} is not finite and positive")
    return TensorHeader(bool(basis), rank, float(mean_step), float(coef_step))


def max_payload_bytes(shape: tuple[int, int, int], dtype: np.dtype, level_name_bytes: int) -> int:
    """The largest valid version 2 payload of this shape: both bases stored at full rank."""
    heads, tokens, head_dim = shape
    full = TensorHeader(True, min(tokens, heads * head_dim), 1.0, 1.0)
    header = LowRankHeader(np.dtype(dtype), heads, tokens, head_dim, "x", (full, full))
    fixed = HEADER.size + level_name_bytes + 2 * TENSOR.size + CHECKSUM_BYTES
    return fixed + sections_bound(header.section_sizes())
