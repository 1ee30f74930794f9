"""The shard wire format, version 1 (little-endian).

```
header   magic "SKKV" | version u16 | dtype u8 | kind u8 | flags u8 | n_classes u8
         | name_len u8 | reserved u8 | heads u32 | tokens u32 | head_dim u32 | kappa f32
name     name_len bytes of ASCII (the level name)
classes  n_classes x f32: nominal bits of each precision class, most important first
sections count u8, then per section: tag 4s | raw_len u32 | comp_len u32 | zstd frame
trailer  sha256 of every byte before it
```

Sections, in order: lossless ``K``, ``V`` (the input's raw bytes); lossy ``STAT`` (f32 mean and
std per (head, channel) of rotated K then V), ``CLS`` (u8 class per (head, token)), ``KLO``,
``KHI``, ``VLO``, ``VHI`` (zigzag code byte planes per (head, token, channel)).

The parser trusts nothing: it checks the checksum first, then every header field against fixed
bounds, derives each section's exact size from the header (never from the section itself), and
decompresses with a hard output limit.
"""

from __future__ import annotations

import hashlib
import io
import math
import struct
from dataclasses import dataclass

import numpy as np
import zstandard

from sakura.platform.errors import CodecError

MAGIC = b"SKKV"
FORMAT_VERSION = 1
HEADER = struct.Struct("<4sHBBBBBBIIIf")
SECTION = struct.Struct("<4sII")
CHECKSUM_BYTES = 32

KIND_LOSSLESS, KIND_QUANTIZED = 0, 1
FLAG_ROTATED = 1
DTYPES: dict[int, np.dtype] = {1: np.dtype(np.float16), 3: np.dtype(np.float32)}
DTYPE_CODES = {dtype: code for code, dtype in DTYPES.items()}

MAX_HEADS, MAX_TOKENS, MAX_HEAD_DIM = 4096, 1 << 20, 1024
MAX_ELEMENTS = 1 << 25  # per tensor: 64 MiB of fp16 K (FLUX.1 at 1024 px needs 12.6 M)
MAX_NAME = 32
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
    expected = header.section_sizes()
    if [len(s) for s in sections] != [size for _, size in expected]:
        raise CodecError("internal error: section sizes do not match the header")
    name = header.level.encode("ascii")
    out = io.BytesIO()
    out.write(HEADER.pack(MAGIC, FORMAT_VERSION, DTYPE_CODES[header.dtype], header.kind,
                          FLAG_ROTATED if header.rotated else 0, len(header.class_bits), len(name), 0,
                          header.heads, header.tokens, header.head_dim, header.kappa))
    out.write(name)
    out.write(struct.pack(f"<{len(header.class_bits)}f", *header.class_bits))
    out.write(struct.pack("<B", len(sections)))
    compressor = zstandard.ZstdCompressor(level=zstd_level, write_content_size=True, write_checksum=False)
    for (tag, _), raw in zip(expected, sections):
        frame = compressor.compress(raw)
        out.write(SECTION.pack(tag, len(raw), len(frame)))
        out.write(frame)
    body = out.getvalue()
    return body + hashlib.sha256(body).digest()


@dataclass(frozen=True)
class Expectation:
    """What the caller knows a payload must be, checked on the header before anything is
    decompressed: a checksummed 8 kB payload may otherwise declare half a gigabyte."""

    shape: tuple[int, int, int] | None = None
    dtype: np.dtype | None = None
    max_output_bytes: int | None = None  # K and V together, as decoded

    def check(self, header: ShardHeader) -> None:
        if self.shape is not None and header.shape != tuple(self.shape):
            raise CodecError(f"shard has shape {header.shape}, expected {tuple(self.shape)}")
        if self.dtype is not None and header.dtype != np.dtype(self.dtype):
            raise CodecError(f"shard has dtype {header.dtype}, expected {np.dtype(self.dtype)}")
        output = 2 * header.elements * header.dtype.itemsize
        if self.max_output_bytes is not None and output > self.max_output_bytes:
            raise CodecError(f"shard decodes to {output} bytes, over the caller's budget of {self.max_output_bytes}")


def max_payload_bytes(shape: tuple[int, int, int], dtype: np.dtype, level_name_bytes: int = MAX_NAME) -> int:
    """The largest valid payload of a shard of this shape and dtype, at any level: every section
    at its exact raw size, plus zstd's worst-case expansion, plus the header. A client bounds a
    download by this, never by a length the server sends."""
    largest = 0
    for kind, n_classes in ((KIND_LOSSLESS, 0), (KIND_QUANTIZED, MAX_CLASSES)):
        header = ShardHeader(np.dtype(dtype), kind, False, *shape, 1.0, "x", (1.0,) * n_classes)
        sections = sum(SECTION.size + _zstd_bound(size) for _, size in header.section_sizes())
        fixed = HEADER.size + level_name_bytes + 4 * n_classes + 1 + CHECKSUM_BYTES
        largest = max(largest, fixed + sections)
    return largest


def _zstd_bound(size: int) -> int:
    """ZSTD_COMPRESSBOUND from zstd.h, plus the frame header (at most 18 bytes)."""
    return size + (size >> 8) + (((128 << 10) - size) >> 11 if size < (128 << 10) else 0) + 18


def read_payload(data: bytes, expect: Expectation | None = None) -> tuple[ShardHeader, list[bytes]]:
    """Validate a payload and return its header and decompressed sections."""
    view = memoryview(data)
    if len(view) < HEADER.size + 1 + CHECKSUM_BYTES:
        raise CodecError(f"shard payload is truncated ({len(view)} bytes)")
    body = view[:-CHECKSUM_BYTES]
    if hashlib.sha256(body).digest() != bytes(view[-CHECKSUM_BYTES:]):
        raise CodecError("shard checksum mismatch: the payload is corrupt or truncated")
    header, offset = _read_header(body)
    if expect is not None:
        expect.check(header)
    sections = _read_sections(body, offset, header)
    return header, sections


def peek_header(data: bytes) -> ShardHeader:
    """The header alone (no checksum or body checks): for listing, never for decoding."""
    header, _ = _read_header(memoryview(data))
    return header


def _read_header(body: memoryview) -> tuple[ShardHeader, int]:
    if len(body) < HEADER.size:
        raise CodecError("shard payload is truncated inside the header")
    (magic, version, dtype_code, kind, flags, n_classes, name_len, _reserved,
     heads, tokens, head_dim, kappa) = HEADER.unpack_from(body, 0)
    if magic != MAGIC:
        raise CodecError("not a SAKURA shard (bad magic bytes)")
    if version != FORMAT_VERSION:
        raise CodecError(f"unsupported shard format version {version} (this reader knows {FORMAT_VERSION})")
    if dtype_code not in DTYPES:
        raise CodecError(f"unsupported dtype code {dtype_code}")
    if kind not in (KIND_LOSSLESS, KIND_QUANTIZED):
        raise CodecError(f"unknown shard kind {kind}")
    if flags & ~FLAG_ROTATED:
        raise CodecError(f"unknown flags {flags:#x}")
    _check_dims(heads, tokens, head_dim)
    if kind == KIND_LOSSLESS and (n_classes or flags):
        raise CodecError("a lossless shard has no classes and no flags")
    if kind == KIND_QUANTIZED:
        if not 1 <= n_classes <= MAX_CLASSES:
            raise CodecError(f"class count {n_classes} outside [1, {MAX_CLASSES}]")
        if not (math.isfinite(kappa) and 0.0 < kappa <= 64.0):
            raise CodecError(f"kappa {kappa} outside (0, 64]")
        if flags & FLAG_ROTATED and head_dim & (head_dim - 1):
            raise CodecError(f"rotated shard with non-power-of-two head_dim {head_dim}")
    if not 1 <= name_len <= MAX_NAME:
        raise CodecError(f"level name length {name_len} outside [1, {MAX_NAME}]")
    offset = HEADER.size
    end = offset + name_len + 4 * n_classes
    if len(body) < end:
        raise CodecError("shard payload is truncated inside the header")
    try:
        level = bytes(body[offset : offset + name_len]).decode("ascii")
    except UnicodeDecodeError:
        raise CodecError("level name is not ASCII") from None
    if not level.isprintable():
        raise CodecError("level name has unprintable characters")
    class_bits = struct.unpack_from(f"<{n_classes}f", body, offset + name_len)
    if any(not (math.isfinite(b) and 1.0 <= b <= 16.0) for b in class_bits):
        raise CodecError(f"class bit depths {class_bits} outside [1, 16]")
    header = ShardHeader(DTYPES[dtype_code], kind, bool(flags & FLAG_ROTATED), heads, tokens, head_dim,
                         float(kappa), level, tuple(float(b) for b in class_bits))
    return header, end


def _check_dims(heads: int, tokens: int, head_dim: int) -> None:
    if not (1 <= heads <= MAX_HEADS and 1 <= tokens <= MAX_TOKENS and 1 <= head_dim <= MAX_HEAD_DIM):
        raise CodecError(f"shard shape {(heads, tokens, head_dim)} outside the supported bounds")
    if heads * tokens * head_dim > MAX_ELEMENTS:
        raise CodecError(f"shard of {heads * tokens * head_dim} elements exceeds the limit of {MAX_ELEMENTS}")


def _read_sections(body: memoryview, offset: int, header: ShardHeader) -> list[bytes]:
    expected = header.section_sizes()
    if offset >= len(body) or body[offset] != len(expected):
        raise CodecError(f"expected {len(expected)} sections")
    offset += 1
    out = []
    for tag, size in expected:
        if offset + SECTION.size > len(body):
            raise CodecError("shard payload is truncated inside a section header")
        got_tag, raw_len, comp_len = SECTION.unpack_from(body, offset)
        offset += SECTION.size
        if got_tag != tag:
            raise CodecError(f"expected section {tag!r}, found {got_tag!r}")
        if raw_len != size:
            raise CodecError(f"section {tag!r} declares {raw_len} bytes, the header implies {size}")
        if comp_len > len(body) - offset:
            raise CodecError(f"section {tag!r} runs past the end of the payload")
        out.append(_decompress(body[offset : offset + comp_len], size, tag))
        offset += comp_len
    if offset != len(body):
        raise CodecError(f"{len(body) - offset} unexpected bytes after the last section")
    return out


def _decompress(frame: memoryview, size: int, tag: bytes) -> bytes:
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(frame), read_across_frames=False)
        raw = reader.read(size + 1)
    except zstandard.ZstdError as exc:
        raise CodecError(f"section {tag!r} is not valid zstd: {exc}") from None
    if len(raw) != size:
        raise CodecError(f"section {tag!r} decompresses to the wrong size")
    return raw
