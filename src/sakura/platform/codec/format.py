"""The shard wire format: version 1 here, version 2 (a low-rank transform) in :mod:`format_v2`,
both in the frame of :mod:`container`; a reader takes either.

Version 1 adds to the container's header:

```
name     name_len bytes of ASCII (the level name)
classes  n_classes x f32: nominal bits of each precision class, most important first
```

Sections, in order: lossless ``K``, ``V`` (the input's raw bytes); lossy ``STAT`` (f32 mean and
std per (head, channel) of rotated K then V), ``CLS`` (u8 class per (head, token)), ``KLO``,
``KHI``, ``VLO``, ``VHI`` (zigzag code byte planes per (head, token, channel)).

The parser trusts nothing: it checks the checksum first, then every header field against fixed
bounds, derives each section's exact size from the header (never from the section itself), and
decompresses with a hard output limit.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np

from sakura.platform.codec import format_v2
from sakura.platform.codec.container import (
    CHECKSUM_BYTES,
    DTYPE_CODES,
    DTYPES,
    HEADER,
    MAGIC,
    MAX_NAME,
    SECTION,
    Expectation,
    Header,
    check_dims,
    checked_body,
    compress,
    read_level_name,
    read_sections,
    sections_bound,
)
from sakura.platform.codec.container import (
    write_payload as write_frame,
)
from sakura.platform.errors import CodecError

__all__ = ["FORMAT_VERSION", "FORMAT_VERSIONS", "HEADER", "MAGIC", "SECTION", "Expectation", "ShardHeader",
           "max_payload_bytes", "peek_header", "read_payload", "write_payload"]

FORMAT_VERSION = 1
#: Every version this reader decodes.
FORMAT_VERSIONS = (FORMAT_VERSION, format_v2.VERSION)
KIND_LOSSLESS, KIND_QUANTIZED = 0, 1
FLAG_ROTATED = 1
MAX_CLASSES = 16


@dataclass(frozen=True)
class ShardHeader:
    dtype: np.dtype
    kind: int
    rotated: bool
    heads: int
    tokens: int
    head_dim: int
    kappa: float
    level: str
    class_bits: tuple[float, ...]

    version = FORMAT_VERSION

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.heads, self.tokens, self.head_dim)

    @property
    def elements(self) -> int:
        return self.heads * self.tokens * self.head_dim

    def section_sizes(self) -> list[tuple[bytes, int]]:
        """Each expected section's tag and exact decompressed size, derived from the header."""
        n = self.elements
        if self.kind == KIND_LOSSLESS:
            return [(b"K\0\0\0", n * self.dtype.itemsize), (b"V\0\0\0", n * self.dtype.itemsize)]
        stats = 4 * self.heads * self.head_dim * 4
        planes = [(tag, n) for tag in (b"KLO\0", b"KHI\0", b"VLO\0", b"VHI\0")]
        return [(b"STAT", stats), (b"CLS\0", self.heads * self.tokens), *planes]


def write_payload(header: ShardHeader, sections: list[bytes], zstd_level: int) -> bytes:
    name = header.level.encode("ascii")
    fixed = HEADER.pack(MAGIC, FORMAT_VERSION, DTYPE_CODES[header.dtype], header.kind,
                        FLAG_ROTATED if header.rotated else 0, len(header.class_bits), len(name), 0,
                        header.heads, header.tokens, header.head_dim, header.kappa)
    classes = struct.pack(f"<{len(header.class_bits)}f", *header.class_bits)
    return write_frame(fixed + name + classes, header.section_sizes(),
                       [(len(raw), compress(raw, zstd_level)) for raw in sections])


def max_payload_bytes(shape: tuple[int, int, int], dtype: np.dtype, level_name_bytes: int = MAX_NAME) -> int:
    """The largest valid payload of a shard of this shape and dtype, at any level of any version:
    every section at its exact raw size, plus zstd's worst-case expansion, plus the header. A client
    bounds a download by this, never by a length the server sends."""
    largest = format_v2.max_payload_bytes(shape, dtype, level_name_bytes)
    for kind, n_classes in ((KIND_LOSSLESS, 0), (KIND_QUANTIZED, MAX_CLASSES)):
        header = ShardHeader(np.dtype(dtype), kind, False, *shape, 1.0, "x", (1.0,) * n_classes)
        fixed = HEADER.size + level_name_bytes + 4 * n_classes + CHECKSUM_BYTES
        largest = max(largest, fixed + sections_bound(header.section_sizes()))
    return largest


def read_payload(data: bytes, expect: Expectation | None = None) -> tuple[Header, list[bytes]]:
    """Validate a payload of any version and return its header and decompressed sections."""
    body = checked_body(data)
    header, offset = _read_header(body)
    if expect is not None:
        expect.check(header)
    return header, read_sections(body, offset, header.section_sizes())


def peek_header(data: bytes) -> Header:
    """The header alone (no checksum or body checks): for listing, never for decoding."""
    header, _ = _read_header(memoryview(data))
    return header


def _read_header(body: memoryview) -> tuple[Header, int]:
    if len(body) < HEADER.size:
        raise CodecError("shard payload is truncated inside the header")
    fields = HEADER.unpack_from(body, 0)
    magic, version = fields[0], fields[1]
    if magic != MAGIC:
        raise CodecError("not a SAKURA shard (bad magic bytes)")
    if version == format_v2.VERSION:
        return format_v2.read_header(fields, body)
    if version != FORMAT_VERSION:
        raise CodecError(f"unsupported shard format version {version} (this reader knows "
                         f"{', '.join(map(str, FORMAT_VERSIONS))})")
    return _read_v1_header(fields, body)


def _read_v1_header(fields: tuple, body: memoryview) -> tuple[ShardHeader, int]:
    (_, _, dtype_code, kind, flags, n_classes, name_len, _reserved, heads, tokens, head_dim, kappa) = fields
    if dtype_code not in DTYPES:
        raise CodecError(f"unsupported dtype code {dtype_code}")
    if kind not in (KIND_LOSSLESS, KIND_QUANTIZED):
        raise CodecError(f"unknown shard kind {kind}")
    if flags & ~FLAG_ROTATED:
        raise CodecError(f"unknown flags {flags:#x}")
    check_dims(heads, tokens, head_dim)
    if kind == KIND_LOSSLESS and (n_classes or flags):
        raise CodecError("a lossless shard has no classes and no flags")
    if kind == KIND_QUANTIZED:
        if not 1 <= n_classes <= MAX_CLASSES:
            raise CodecError(f"class count {n_classes} outside [1, {MAX_CLASSES}]")
        if not (math.isfinite(kappa) and 0.0 < kappa <= 64.0):
            raise CodecError(f"kappa {kappa} outside (0, 64]")
        if flags & FLAG_ROTATED and head_dim & (head_dim - 1):
            raise CodecError(f"rotated shard with non-power-of-two head_dim {head_dim}")
    level = read_level_name(body, HEADER.size, name_len)
    offset = HEADER.size + name_len
    end = offset + 4 * n_classes
    if len(body) < end:
        raise CodecError("shard payload is truncated inside the header")
    class_bits = struct.unpack_from(f"<{n_classes}f", body, offset)
    if any(not (math.isfinite(b) and 1.0 <= b <= 16.0) for b in class_bits):
        raise CodecError(f"class bit depths {class_bits} outside [1, 16]")
    header = ShardHeader(DTYPES[dtype_code], kind, bool(flags & FLAG_ROTATED), heads, tokens, head_dim,
                         float(kappa), level, tuple(float(b) for b in class_bits))
    return header, end
