"""Every error path of the decoder raises CodecError with a message that says what is wrong."""

from __future__ import annotations

import struct

import pytest
import zstandard

from sakura.platform.codec import decode_shard, encode_shard, v1_levels
from sakura.platform.codec.format import HEADER, SECTION
from sakura.platform.errors import CodecError
from tests.unit.platform.codec.conftest import make_pair, resign

LEVELS = v1_levels()  # version 1 payloads (version 2's own: test_format_v2.py)


@pytest.fixture(scope="module")
def lossy() -> bytes:
    return encode_shard(make_pair(2, 8, 4), LEVELS["medium"])


@pytest.fixture(scope="module")
def lossless() -> bytes:
    return encode_shard(make_pair(2, 8, 4), LEVELS["full"])


def header_fields(payload: bytes) -> list:
    return list(HEADER.unpack_from(payload, 0))


def with_header(payload: bytes, **changes) -> bytes:
    names = [
        "magic", "version", "dtype", "kind", "flags", "n_classes", "name_len", "reserved",
        "heads", "tokens", "head_dim", "kappa",
    ]
    fields = dict(zip(names, header_fields(payload)))
    fields.update(changes)
    return resign(HEADER.pack(*fields.values()) + payload[HEADER.size :])


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(magic=b"NOPE"), "bad magic"),
        (dict(version=3), "unsupported shard format version 3"),
        (dict(version=2), "unknown shard kind 1 for format version 2"),
        (dict(dtype=2), "unsupported dtype"),
        (dict(dtype=99), "unsupported dtype"),
        (dict(kind=7), "unknown shard kind"),
        (dict(flags=0x80), "unknown flags"),
        (dict(heads=0), "outside the supported bounds"),
        (dict(tokens=1 << 30), "outside the supported bounds"),
        (dict(heads=4096, tokens=1 << 20, head_dim=1024), "exceeds the limit"),
        (dict(n_classes=0), "class count"),
        (dict(n_classes=200), "class count"),
        (dict(kappa=float("nan")), "kappa"),
        (dict(kappa=-1.0), "kappa"),
        (dict(name_len=0), "level name length"),
        (dict(name_len=200), "level name length"),
        (dict(head_dim=3), "non-power-of-two"),
        (dict(tokens=9), "declares"),
    ],
)
def test_hostile_header_fields(lossy, changes, message):
    with pytest.raises(CodecError, match=message):
        decode_shard(with_header(lossy, **changes))


def test_lossless_with_classes_is_rejected(lossless):
    with pytest.raises(CodecError, match="no classes"):
        decode_shard(with_header(lossless, n_classes=1))


def _locate_sections(payload: bytes) -> tuple[int, list[tuple[int, bytes, int, int]]]:
    fields = header_fields(payload)
    offset = HEADER.size + fields[6] + 4 * fields[5]
    count_at = offset
    offset += 1
    out = []
    while offset < len(payload) - 32:
        tag, raw, comp = SECTION.unpack_from(payload, offset)
        out.append((offset, tag, raw, comp))
        offset += SECTION.size + comp
    return count_at, out


def test_class_bits_out_of_range(lossy):
    at = HEADER.size + header_fields(lossy)[6]
    bad = lossy[:at] + struct.pack("<f", 99.0) + lossy[at + 4 :]
    with pytest.raises(CodecError, match="bit depths"):
        decode_shard(resign(bad))


def test_non_ascii_level_name(lossy):
    at = HEADER.size
    bad = lossy[:at] + b"\xff" + lossy[at + 1 :]
    with pytest.raises(CodecError, match="ASCII"):
        decode_shard(resign(bad))


def test_section_count_tag_and_lengths(lossy):
    count_at, sections = _locate_sections(lossy)
    with pytest.raises(CodecError, match="expected 6 sections"):
        decode_shard(resign(lossy[:count_at] + b"\x05" + lossy[count_at + 1 :]))
    at, tag, raw, comp = sections[1]
    with pytest.raises(CodecError, match="expected section"):
        decode_shard(resign(lossy[:at] + SECTION.pack(b"XXXX", raw, comp) + lossy[at + SECTION.size :]))
    with pytest.raises(CodecError, match="runs past the end"):
        decode_shard(resign(lossy[:at] + SECTION.pack(tag, raw, 1 << 31) + lossy[at + SECTION.size :]))
    with pytest.raises(CodecError, match="declares"):
        decode_shard(resign(lossy[:at] + SECTION.pack(tag, raw + 1, comp) + lossy[at + SECTION.size :]))


def test_section_that_is_not_zstd_or_the_wrong_size(lossy):
    _, sections = _locate_sections(lossy)
    at, tag, raw, comp = sections[1]
    body_at = at + SECTION.size
    garbage = b"\x00" * comp
    with pytest.raises(CodecError, match="not valid zstd|wrong size"):
        decode_shard(resign(lossy[:body_at] + garbage + lossy[body_at + comp :]))
    short = zstandard.ZstdCompressor().compress(b"\x00" * (raw - 1))
    rebuilt = lossy[:at] + SECTION.pack(tag, raw, len(short)) + short + lossy[body_at + comp :]
    with pytest.raises(CodecError, match="wrong size"):
        decode_shard(resign(rebuilt))


def _with_section(payload: bytes, index: int, tag: bytes, fill: bytes) -> bytes:
    """``payload`` with section ``index`` replaced by a valid zstd frame of ``fill`` repeated."""
    _, sections = _locate_sections(payload)
    at, found, raw, comp = sections[index]
    assert found == tag
    frame = zstandard.ZstdCompressor().compress(fill * (raw // len(fill)))
    return resign(payload[:at] + SECTION.pack(tag, raw, len(frame)) + frame + payload[at + SECTION.size + comp :])


def test_class_index_beyond_the_defined_classes(lossy):
    with pytest.raises(CodecError, match="precision class"):
        decode_shard(_with_section(lossy, 1, b"CLS\0", b"\x09"))


def test_non_finite_statistics(lossy):
    with pytest.raises(CodecError, match="statistics"):
        decode_shard(_with_section(lossy, 0, b"STAT", struct.pack("<f", float("inf"))))


def test_trailing_bytes(lossy):
    with pytest.raises(CodecError, match="unexpected bytes"):
        decode_shard(resign(lossy[:-32] + b"junk" + lossy[-32:]))


def test_checksum_mismatch_and_every_truncation(lossy, lossless):
    flipped = bytearray(lossy)
    flipped[40] ^= 1
    with pytest.raises(CodecError, match="checksum"):
        decode_shard(bytes(flipped))
    for payload in (lossy, lossless):
        for n in range(len(payload)):
            with pytest.raises(CodecError):
                decode_shard(payload[:n])
            if n < len(payload) - 32:  # a truncated body with a valid checksum
                with pytest.raises(CodecError):
                    decode_shard(resign(payload[:n] + b"\0" * 32))
