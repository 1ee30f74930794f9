"""Every header field of wire format v2 is bounded before anything is allocated or decompressed:
each hostile value raises CodecError saying what is wrong."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from sakura.platform.codec import container, decode_shard, default_levels, encode_shard, max_payload_bytes
from sakura.platform.codec.format import HEADER, SECTION
from sakura.platform.codec.format_v2 import TENSOR
from sakura.platform.errors import CodecError
from tests.unit.platform.codec.conftest import make_low_rank_pair, make_pair, resign

TENSOR_FIELDS = ["basis", "r1", "r2", "r3", "rank", "mean_step", "coef_step"]
HEADER_FIELDS = ["magic", "version", "dtype", "kind", "flags", "n_classes", "name_len", "reserved", "heads", "tokens",
                 "head_dim", "kappa"]


@pytest.fixture(scope="module")
def stored() -> bytes:
    """K and V both with a stored basis (heads 2 x tokens 12 x head_dim 4: width 8)."""
    return encode_shard(make_low_rank_pair(2, 12, 4, rank=2, seed=1), default_levels()["medium"])


@pytest.fixture(scope="module")
def identity() -> bytes:
    return encode_shard(make_pair(2, 6, 4, seed=2), default_levels()["compact"])


def _tensor_at(payload: bytes, which: int) -> int:
    return HEADER.size + HEADER.unpack_from(payload, 0)[6] + which * TENSOR.size


def with_tensor(payload: bytes, which: int, **changes) -> bytes:
    at = _tensor_at(payload, which)
    fields = dict(zip(TENSOR_FIELDS, TENSOR.unpack_from(payload, at)))
    fields.update(changes)
    return resign(payload[:at] + TENSOR.pack(*fields.values()) + payload[at + TENSOR.size :])


def with_header(payload: bytes, **changes) -> bytes:
    fields = dict(zip(HEADER_FIELDS, HEADER.unpack_from(payload, 0)))
    fields.update(changes)
    return resign(HEADER.pack(*fields.values()) + payload[HEADER.size :])


def test_the_fixtures_are_what_they_say(stored, identity):
    assert TENSOR.unpack_from(stored, _tensor_at(stored, 0))[0] == 1
    assert TENSOR.unpack_from(identity, _tensor_at(identity, 1))[0] == 0


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize("changes, message", [
    (dict(rank=9), "exceeds min"),  # width 8
    (dict(rank=1 << 31), "exceeds min"),
    (dict(basis=2), "unknown basis kind"),
    (dict(r2=1), "reserved bytes"),
    (dict(mean_step=float("nan")), "mean step"),
    (dict(mean_step=0.0), "mean step"),
    (dict(coef_step=-1.0), "coefficient step"),
    (dict(coef_step=float("inf")), "coefficient step"),
    (dict(rank=1), "declares"),  # a valid rank whose sections no longer match
])
def test_hostile_tensor_headers(stored, which, changes, message):
    with pytest.raises(CodecError, match=message):
        decode_shard(with_tensor(stored, which, **changes))


def test_an_identity_basis_has_the_full_width_as_its_rank(identity):
    with pytest.raises(CodecError, match="identity basis has rank"):
        decode_shard(with_tensor(identity, 0, rank=3))


@pytest.mark.parametrize("changes, message", [
    (dict(kind=1), "unknown shard kind 1 for format version 2"),
    (dict(flags=1), "no flags, classes or kappa"),
    (dict(n_classes=2), "no flags, classes or kappa"),
    (dict(kappa=3.0), "no flags, classes or kappa"),
    (dict(reserved=1), "no flags, classes or kappa"),
    (dict(dtype=2), "unsupported dtype"),
    (dict(heads=4096, tokens=1 << 20, head_dim=1024), "exceeds the limit"),
    (dict(name_len=0), "level name length"),
    (dict(tokens=13), "declares"),
])
def test_hostile_container_fields(stored, changes, message):
    with pytest.raises(CodecError, match=message):
        decode_shard(with_header(stored, **changes))


def test_a_truncated_tensor_header_is_refused(stored):
    at = _tensor_at(stored, 1) + 5
    with pytest.raises(CodecError, match="truncated"):
        decode_shard(resign(stored[:at] + b"\0" * 32))


def _basis_steps_section(payload: bytes) -> tuple[int, int]:
    """Where the K basis steps section's frame starts, and its compressed length."""
    offset = _tensor_at(payload, 2) + 1
    while True:
        tag, raw, comp = SECTION.unpack_from(payload, offset)
        if tag == b"KSTP":
            return offset, comp
        offset += SECTION.size + comp


@pytest.mark.parametrize("bad", [float("nan"), 0.0, -2.0, float("inf")])
def test_basis_steps_must_be_finite_and_positive(stored, bad):
    at, comp = _basis_steps_section(stored)
    raw = struct.pack("<2f", bad, 1.0)
    frame = container.compress(raw, 3)
    rebuilt = stored[:at] + SECTION.pack(b"KSTP", len(raw), len(frame)) + frame + stored[at + SECTION.size + comp : -32]
    with pytest.raises(CodecError, match="basis steps"):
        decode_shard(resign(rebuilt + b"\0" * 32))


def test_values_too_large_for_the_dtype_are_refused_in_either_form():
    pair = make_low_rank_pair(2, 12, 4, rank=2, seed=3, dtype=np.float16)
    payload = encode_shard(pair, default_levels()["medium"])
    hostile = with_tensor(payload, 1, coef_step=3e38)
    for factored in (False, True):
        with pytest.raises(CodecError, match="non-finite"):
            decode_shard(hostile, factored=factored)


def test_the_download_bound_covers_version_2_at_full_rank():
    shape = (2, 12, 4)
    full_rank = 2 * (2 * 8 + 4 * 8 + 2 * 8 * 8 + 2 * 12 * 8)  # mean, steps, basis, coefficients of K and V
    assert max_payload_bytes(shape, np.dtype(np.float16)) > full_rank
