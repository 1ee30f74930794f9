"""Golden bytes pin the wire formats: committed payloads must keep decoding to the same arrays.

Version 1 (the class levels it was made with, ``v1_levels``) decodes bit for bit. Version 2 pins
its integer codes and steps bit for bit and its rebuilt K/V to float32 rounding (a matrix product:
BLAS libraries may sum in another order). Regenerate only when a format version changes:
``python -m tests.unit.platform.codec.test_golden --write``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from sakura.platform.codec import decode_shard, default_levels, encode_shard, peek_header, v1_levels
from sakura.platform.codec.format import HEADER, read_payload
from sakura.platform.codec.format_v2 import LowRankHeader
from sakura.platform.codec.lowrank import from_sections
from sakura.platform.kv import KVPair

GOLDEN = Path(__file__).resolve().parents[3] / "golden"
V1 = ("compact", "medium", "full")
V2 = ("compact", "medium")


def golden_input() -> tuple[KVPair, np.ndarray]:
    """A fixed shard: no RNG involved, so it is the same on every platform."""
    i = np.arange(2 * 8 * 4, dtype=np.float64).reshape(2, 8, 4)
    k = np.sin(i * 0.37) * (1 + (i % 4))
    v = np.cos(i * 0.21) * 2 - 0.5
    scores = np.sin(np.arange(16, dtype=np.float64) * 1.3).reshape(2, 8)
    return KVPair(k.astype(np.float16), v.astype(np.float16)), scores.astype(np.float32)


def golden_v2_input() -> tuple[KVPair, np.ndarray]:
    """A fixed shard of rank 2 over its joint width, plus a ripple: version 2 stores bases for it."""
    n = np.arange(16, dtype=np.float64)[:, None]
    w = np.arange(8, dtype=np.float64)[None, :]
    joint = np.sin(n * 0.3) * np.cos(w * 0.7) * 3 + np.cos(n * 0.11) * np.sin(w * 0.5 + 1) + 0.01 * np.sin(n * w)
    k = joint.reshape(16, 2, 4).transpose(1, 0, 2)
    v = (joint[::-1] * 0.5 + 1).reshape(16, 2, 4).transpose(1, 0, 2)
    scores = 1 + np.cos(np.arange(32, dtype=np.float64) * 0.9).reshape(2, 16)
    return KVPair(k.astype(np.float32), v.astype(np.float32)), scores.astype(np.float32)


def _path(version: int, level: str) -> Path:
    return GOLDEN / f"shard-v{version}-{level}.skv"


@pytest.mark.parametrize("level", V1)
def test_golden_v1_payload_decodes_to_pinned_arrays(level):
    expected = np.load(GOLDEN / "shard-v1-expected.npz")
    out = decode_shard(_path(1, level).read_bytes())
    assert out.k.dtype == np.float16
    assert out.k.tobytes() == expected[f"{level}_k"].tobytes()
    assert out.v.tobytes() == expected[f"{level}_v"].tobytes()


@pytest.mark.parametrize("level", V1)
def test_encoder_still_writes_the_golden_v1_format(level):
    pair, scores = golden_input()
    payload = encode_shard(pair, v1_levels()[level], scores)
    golden = _path(1, level).read_bytes()
    header = peek_header(golden)
    assert (header.level, header.shape, header.dtype) == (level, (2, 8, 4), np.dtype(np.float16))
    # Header, level name and class table are byte-identical (zstd frames may differ across zstd releases).
    prefix = HEADER.size + len(level) + 4 * len(header.class_bits) + 1
    assert payload[:prefix] == golden[:prefix]
    assert payload[:4] == b"SKKV" and payload[4:6] == (1).to_bytes(2, "little")
    ours, theirs = decode_shard(payload), decode_shard(golden)
    assert ours.k.tobytes() == theirs.k.tobytes() and ours.v.tobytes() == theirs.v.tobytes()


def test_full_golden_is_the_input_itself():
    pair, _ = golden_input()
    out = decode_shard(_path(1, "full").read_bytes())
    assert out.k.tobytes() == pair.k.tobytes() and out.v.tobytes() == pair.v.tobytes()


def _codes(payload: bytes) -> dict[str, np.ndarray]:
    header, sections = read_payload(payload)
    assert isinstance(header, LowRankHeader)
    split = len(sections) - (4 if header.tensors[1].basis else 2)
    out = {}
    for name, t, part in zip("kv", header.tensors, (sections[:split], sections[split:])):
        code = from_sections(t, part, header.tokens, header.width)
        out[f"{name}_steps"] = np.array([code.mean_step, code.coef_step], np.float32)
        out[f"{name}_mean"], out[f"{name}_coef"] = code.mean_codes, code.coef_codes
        if code.basis_codes is not None and code.basis_steps is not None:
            out[f"{name}_basis"], out[f"{name}_basis_steps"] = code.basis_codes, code.basis_steps
    return out


@pytest.mark.parametrize("level", V2)
def test_golden_v2_payload_decodes_to_pinned_codes_and_arrays(level):
    expected = np.load(GOLDEN / "shard-v2-expected.npz")
    payload = _path(2, level).read_bytes()
    header = peek_header(payload)
    assert isinstance(header, LowRankHeader) and header.tensors[0].basis and header.tensors[1].basis
    for name, codes in _codes(payload).items():
        assert codes.tobytes() == expected[f"{level}_{name}"].tobytes(), name
    out = decode_shard(payload)
    assert out.k.dtype == np.float32
    np.testing.assert_allclose(out.k, expected[f"{level}_k"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.v, expected[f"{level}_v"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("level", V2)
def test_encoder_still_writes_the_golden_v2_format(level):
    pair, scores = golden_v2_input()
    payload = encode_shard(pair, default_levels()[level], scores)
    golden = _path(2, level).read_bytes()
    # The container's header and the level name are byte-identical; the tensor headers hold steps
    # from an SVD, whose last bits may differ across BLAS libraries, so they are decoded and compared.
    prefix = HEADER.size + len(level)
    assert payload[:prefix] == golden[:prefix]
    ours, theirs = peek_header(payload), peek_header(golden)
    assert isinstance(ours, LowRankHeader) and isinstance(theirs, LowRankHeader)
    for a, b in zip(ours.tensors, theirs.tensors):
        assert (a.basis, a.rank) == (b.basis, b.rank)
        assert a.coef_step == pytest.approx(b.coef_step, rel=1e-4)
    assert len(payload) == pytest.approx(len(golden), rel=0.1)
    assert np.allclose(decode_shard(payload).k, decode_shard(golden).k, atol=1e-3 * float(np.abs(pair.k).max()))


def _write() -> None:
    pair, scores = golden_input()
    arrays = {}
    for level in V1:
        payload = encode_shard(pair, v1_levels()[level], scores)
        _path(1, level).write_bytes(payload)
        out = decode_shard(payload)
        arrays[f"{level}_k"], arrays[f"{level}_v"] = out.k, out.v
    np.savez(GOLDEN / "shard-v1-expected.npz", **arrays)
    pair, scores = golden_v2_input()
    arrays = {}
    for level in V2:
        payload = encode_shard(pair, default_levels()[level], scores)
        _path(2, level).write_bytes(payload)
        out = decode_shard(payload)
        arrays[f"{level}_k"], arrays[f"{level}_v"] = out.k, out.v
        arrays.update({f"{level}_{name}": codes for name, codes in _codes(payload).items()})
    np.savez(GOLDEN / "shard-v2-expected.npz", **arrays)


if __name__ == "__main__" and "--write" in sys.argv:
    _write()
