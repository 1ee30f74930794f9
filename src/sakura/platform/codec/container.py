"""The frame every shard payload shares, whatever its format version (little-endian):

```
header   magic "SKKV" | version u16 | dtype u8 | kind u8 | flags u8 | n_classes u8
         | name_len u8 | reserved u8 | heads u32 | tokens u32 | head_dim u32 | kappa f32
...      what the version adds to the header (``format`` v1, ``format_v2``)
sections count u8, then per section: tag 4s | raw_len u32 | comp_len u32 | zstd frame
trailer  sha256 of every byte before it
```

Here: the bounds a header must respect before anything is allocated, the checksum, and the
sections, whose exact sizes the caller derives from the header (never from the sections
themselves) and which are decompressed under a hard output limit.
"""

from __future__ import annotations

import hashlib
import io
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import zstandard

from sakura.platform.errors import CodecError

MAGIC = b"SKKV"
HEADER = struct.Struct("<4sHBBBBBBIIIf")
SECTION = struct.Struct("<4sII")
CHECKSUM_BYTES = 32

DTYPES: dict[int, np.dtype] = {1: np.dtype(np.float16), 3: np.dtype(np.float32)}
DTYPE_CODES = {dtype: code for code, dtype in DTYPES.items()}

MAX_HEADS, MAX_TOKENS, MAX_HEAD_DIM = 4096, 1 << 20, 1024
MAX_ELEMENTS = 1 << 25  # per tensor: 64 MiB of fp16 K (FLUX.1 at 1024 px needs 12.6 M)
MAX_NAME = 32
#: The largest magnitude of an integer code: codes travel as two byte planes of their zigzag form.
INT16_MAX = 32767


class Header(Protocol):
    """What every version's parsed header tells: enough to bound the decode before it starts."""

    @property
    def dtype(self) -> np.dtype: ...

    @property
    def level(self) -> str: ...

    @property
    def shape(self) -> tuple[int, int, int]: ...

    @property
    def elements(self) -> int: ...

    def section_sizes(self) -> list[tuple[bytes, int]]: ...


@dataclass(frozen=True)
class Expectation:
    """What the caller knows a payload must be, checked on the header before anything is
    decompressed: a checksummed 8 kB payload may otherwise declare half a gigabyte."""

    shape: tuple[int, int, int] | None = None
    dtype: np.dtype | None = None
    max_output_bytes: int | None = None  # K and V together, as decoded

    def check(self, header: Header) -> None:
        if self.shape is not None and header.shape != tuple(self.shape):
            raise CodecError(f"shard has shape {header.shape}, expected {tuple(self.shape)}")
        if self.dtype is not None and header.dtype != np.dtype(self.dtype):
            raise CodecError(f"shard has dtype {header.dtype}, expected {np.dtype(self.dtype)}")
        output = 2 * header.elements * header.dtype.itemsize
        if self.max_output_bytes is not None and output > self.max_output_bytes:
            raise CodecError(f"shard decodes to {output} bytes, over the caller's budget of {self.max_output_bytes}")


def check_dims(heads: int, tokens: int, head_dim: int) -> None:
    if not (1 <= heads <= MAX_HEADS and 1 <= tokens <= MAX_TOKENS and 1 <= head_dim <= MAX_HEAD_DIM):
        raise CodecError(f"shard shape {(heads, tokens, head_dim)} outside the supported bounds")
    if heads * tokens * head_dim > MAX_ELEMENTS:
        raise CodecError(f"shard of {heads * tokens * head_dim} elements exceeds the limit of {MAX_ELEMENTS}")


def read_level_name(body: memoryview, offset: int, name_len: int) -> str:
    """The level name at ``offset``: 1 to ``MAX_NAME`` bytes of printable ASCII."""
    if not 1 <= name_len <= MAX_NAME:
        raise CodecError(f"level name length {name_len} outside [1, {MAX_NAME}]")
    if len(body) < offset + name_len:
        raise CodecError("shard payload is truncated inside the header")
    try:
        level = bytes(body[offset : offset + name_len]).decode("ascii")
    except UnicodeDecodeError:
        raise CodecError("level name is not ASCII") from None
    if not level.isprintable():
        raise CodecError("level name has unprintable characters")
    return level


def compress(raw: bytes, zstd_level: int) -> bytes:
    return zstandard.ZstdCompressor(level=zstd_level, write_content_size=True, write_checksum=False).compress(raw)


def write_payload(header: bytes, expected: Sequence[tuple[bytes, int]], frames: Sequence[tuple[int, bytes]]) -> bytes:
    """``header`` (every byte before the sections), then each section as (raw size, zstd frame)
    under the tags ``expected`` lists, then the checksum."""
    if [raw for raw, _ in frames] != [size for _, size in expected]:
        raise CodecError("internal error: section sizes do not match the header")
    out = io.BytesIO()
    out.write(header)
    out.write(struct.pack("<B", len(frames)))
    for (tag, _), (raw, frame) in zip(expected, frames):
        out.write(SECTION.pack(tag, raw, len(frame)))
        out.write(frame)
    body = out.getvalue()
    return body + hashlib.sha256(body).digest()


def checked_body(data: bytes) -> memoryview:
    """The payload without its trailer, once the trailer proves it whole."""
    view = memoryview(data)
    if len(view) < HEADER.size + 1 + CHECKSUM_BYTES:
        raise CodecError(f"shard payload is truncated ({len(view)} bytes)")
    body = view[:-CHECKSUM_BYTES]
    if hashlib.sha256(body).digest() != bytes(view[-CHECKSUM_BYTES:]):
        raise CodecError("shard checksum mismatch: the payload is corrupt or truncated")
    return body


def read_sections(body: memoryview, offset: int, expected: Sequence[tuple[bytes, int]]) -> list[bytes]:
    """The sections from ``offset`` on, each exactly the size ``expected`` says, and nothing after."""
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
        out.append(decompress(body[offset : offset + comp_len], size, tag))
        offset += comp_len
    if offset != len(body):
        raise CodecError(f"{len(body) - offset} unexpected bytes after the last section")
    return out


def decompress(frame: memoryview, size: int, tag: bytes) -> bytes:
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(frame), read_across_frames=False)
        raw = reader.read(size + 1)
    except zstandard.ZstdError as exc:
        raise CodecError(f"section {tag!r} is not valid zstd: {exc}") from None
    if len(raw) != size:
        raise CodecError(f"section {tag!r} decompresses to the wrong size")
    return raw


def zstd_bound(size: int) -> int:
    """ZSTD_COMPRESSBOUND from zstd.h, plus the frame header (at most 18 bytes)."""
    return size + (size >> 8) + (((128 << 10) - size) >> 11 if size < (128 << 10) else 0) + 18


def sections_bound(expected: Sequence[tuple[bytes, int]]) -> int:
    """The most bytes these sections (with their count) take on the wire."""
    return 1 + sum(SECTION.size + zstd_bound(size) for _, size in expected)


def to_planes(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Signed codes in [-INT16_MAX, INT16_MAX] as their zigzag form's low and high byte planes (they
    zstd well: the high plane is nearly all zeros)."""
    c = codes.astype(np.int32, copy=False)
    z = ((c << 1) ^ (c >> 31)).astype(np.uint32)
    return (z & 0xFF).astype(np.uint8), (z >> 8).astype(np.uint8)


def from_planes(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """The int32 codes of :func:`to_planes` (any bytes decode to codes in [-32768, 32767])."""
    z = low.astype(np.int32) | (high.astype(np.int32) << 8)
    return (z >> 1) ^ -(z & 1)


def planes_bytes(codes: np.ndarray) -> bytes:
    """:func:`to_planes` as one section: the low plane, then the high one."""
    low, high = to_planes(codes)
    return low.tobytes() + high.tobytes()


def codes_from_bytes(raw: bytes, shape: tuple[int, ...]) -> np.ndarray:
    """The codes of a :func:`planes_bytes` section of ``shape`` (its size already checked)."""
    planes = np.frombuffer(raw, dtype=np.uint8).reshape(2, -1)
    return from_planes(planes[0], planes[1]).reshape(shape)
