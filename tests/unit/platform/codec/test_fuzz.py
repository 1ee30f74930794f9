"""Property-based fuzzing of the decoder: only CodecError, never a crash, hang or huge allocation.

16,000 cases per run (4 tests x 4,000): random byte strings, and mutations of valid payloads of
both wire formats (bit flips, byte overwrites, insertions, deletions, truncations, rewrites of the
container's header fields and of version 2's tensor headers), each both with the original checksum
and re-signed so the mutation reaches the parser behind the checksum. Every decode is also asked
for factors, the form a phone attends to. The cases differ from run to run
(``tests/hypothesis_seed.py``: ``SAKURA_FUZZ_SEED`` replays a run).
"""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sakura.platform.codec import decode_shard, default_levels, encode_shard, v1_levels
from sakura.platform.codec.format import HEADER
from sakura.platform.codec.format_v2 import TENSOR
from sakura.platform.errors import CodecError
from sakura.platform.kv import FactoredPair
from tests.hypothesis_seed import name_the_seed, per_run_seed
from tests.unit.platform.codec.conftest import make_low_rank_pair, make_pair, resign

V2_SEEDS = [
    encode_shard(make_low_rank_pair(2, 12, 4, rank=2, seed=4), default_levels()["medium"]),  # stored bases
    encode_shard(make_pair(2, 6, 4, seed=5), default_levels()["compact"]),  # not low rank: identity bases
]
SEEDS = [
    encode_shard(make_pair(2, 6, 4, seed=1), v1_levels()["compact"]),
    encode_shard(make_pair(2, 6, 4, seed=2), v1_levels()["medium"]),
    encode_shard(make_pair(1, 5, 3, seed=3), v1_levels()["full"]),
    *V2_SEEDS,
]
FUZZ = settings(max_examples=4000, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _decodes_or_codec_error(data: bytes) -> None:
    name_the_seed()
    for factored in (False, True):
        try:
            out = decode_shard(data, factored=factored)
        except CodecError:
            return
        pair = out.dense() if isinstance(out, FactoredPair) else out
        assert pair.k.shape == pair.v.shape and pair.k.size <= 1 << 25


@per_run_seed
@FUZZ
@given(st.binary(min_size=0, max_size=600), st.booleans())
def test_random_bytes(data, with_magic):
    if with_magic:
        data = resign(b"SKKV" + bytes([1 + len(data) % 2, 0]) + data + b"\0" * 32)
    _decodes_or_codec_error(data)


mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10_000), st.integers(0, 7)),
    st.tuples(st.just("set"), st.integers(0, 10_000), st.integers(0, 255)),
    st.tuples(st.just("insert"), st.integers(0, 10_000), st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("delete"), st.integers(0, 10_000), st.integers(1, 64)),
    st.tuples(st.just("truncate"), st.integers(0, 10_000), st.just(0)),
    st.tuples(st.just("field"), st.integers(0, 11), st.integers(0, 2**32 - 1)),
)
FIELD_CODES = ["4s", "H", "B", "B", "B", "B", "B", "B", "I", "I", "I", "f"]


def _mutate(payload: bytes, op: tuple) -> bytes:
    kind, at, arg = op
    data = bytearray(payload)
    if not data and kind != "insert":
        return payload
    at %= max(1, len(data))
    if kind == "flip":
        data[at] ^= 1 << arg
    elif kind == "set":
        data[at] = arg
    elif kind == "insert":
        data[at:at] = arg
    elif kind == "delete":
        del data[at : at + arg]
    elif kind == "truncate":
        del data[at:]
    elif len(data) >= HEADER.size:
        fields = list(HEADER.unpack_from(data, 0))
        index = at % len(FIELD_CODES)
        fields[index] = _fit(FIELD_CODES[index], arg)
        data[: HEADER.size] = HEADER.pack(*fields)
    return bytes(data)


def _fit(code: str, value: int):
    if code == "4s":
        return value.to_bytes(4, "little")
    if code == "f":
        return struct.unpack("<f", value.to_bytes(4, "little"))[0]
    bits = {"B": 8, "H": 16, "I": 32}[code]
    return value % (1 << bits)


@per_run_seed
@FUZZ
@given(st.sampled_from(range(len(SEEDS))), st.lists(mutation, min_size=1, max_size=4), st.booleans())
def test_mutations_of_valid_payloads(seed, ops, sign):
    data = SEEDS[seed]
    for op in ops:
        data = _mutate(data, op)
    _decodes_or_codec_error(resign(data) if sign and len(data) >= 32 else data)


@per_run_seed
@FUZZ
@given(st.sampled_from(range(len(SEEDS))), st.integers(0, 10_000), st.binary(min_size=1, max_size=64))
def test_overwritten_section_bodies(seed, at, junk):
    data = bytearray(SEEDS[seed][:-32])
    start = HEADER.size + (at % max(1, len(data) - HEADER.size))
    data[start : start + len(junk)] = junk
    _decodes_or_codec_error(resign(bytes(data) + b"\0" * 32))


TENSOR_CODES = ["B", "B", "B", "B", "I", "f", "f"]


@per_run_seed
@FUZZ
@given(st.sampled_from(range(len(V2_SEEDS))), st.integers(0, 1), st.integers(0, len(TENSOR_CODES) - 1),
       st.integers(0, 2**32 - 1), st.booleans())
def test_rewritten_v2_tensor_headers(seed, tensor, field, value, sign):
    payload = V2_SEEDS[seed]
    at = HEADER.size + HEADER.unpack_from(payload, 0)[6] + tensor * TENSOR.size
    fields = list(TENSOR.unpack_from(payload, at))
    fields[field] = _fit(TENSOR_CODES[field], value)
    data = payload[:at] + TENSOR.pack(*fields) + payload[at + TENSOR.size :]
    _decodes_or_codec_error(resign(data) if sign else data)
