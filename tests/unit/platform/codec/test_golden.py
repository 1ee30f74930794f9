"""Golden bytes pin wire format v1: committed payloads must keep decoding to the same arrays.

Regenerate only when the format version changes:
``python -m tests.unit.platform.codec.test_golden --write``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from sakura.platform.codec import FORMAT_VERSION, decode_shard, default_levels, encode_shard, peek_header
from sakura.platform.codec.format import HEADER
from sakura.platform.kv import KVPair

GOLDEN = Path(__file__).resolve().parents[3] / "golden"
LEVELS = ("compact", "medium", "full")


def golden_input() -> tuple[KVPair, np.ndarray]:
    """A fixed shard: no RNG involved, so it is the same on every platform."""
    i = np.arange(2 * 8 * 4, dtype=np.float64).reshape(2, 8, 4)
    k = np.sin(i * 0.37) * (1 + (i % 4))
    v = np.cos(i * 0.21) * 2 - 0.5
    scores = np.sin(np.arange(16, dtype=np.float64) * 1.3).reshape(2, 8)
    return KVPair(k.astype(np.float16), v.astype(np.float16)), scores.astype(np.float32)


def _path(level: str) -> Path:
    return GOLDEN / f"shard-v{FORMAT_VERSION}-{level}.skv"


@pytest.mark.parametrize("level", LEVELS)
def test_golden_payload_decodes_to_pinned_arrays(level):
    expected = np.load(GOLDEN / f"shard-v{FORMAT_VERSION}-expected.npz")
    out = decode_shard(_path(level).read_bytes())
    assert out.k.dtype == np.float16
    assert out.k.tobytes() == expected[f"{level}_k"].tobytes()
    assert out.v.tobytes() == expected[f"{level}_v"].tobytes()


@pytest.mark.parametrize("level", LEVELS)
def test_encoder_still_writes_the_golden_format(level):
    pair, scores = golden_input()
    payload = encode_shard(pair, default_levels()[level], scores)
    golden = _path(level).read_bytes()
    header = peek_header(golden)
    assert (header.level, header.shape, header.dtype) == (level, (2, 8, 4), np.dtype(np.float16))
    # Header, level name and class table are byte-identical (zstd frames may differ across zstd releases).
    prefix = HEADER.size + len(level) + 4 * len(header.class_bits) + 1
    assert payload[:prefix] == golden[:prefix]
    assert payload[:4] == b"SKKV" and payload[4:6] == FORMAT_VERSION.to_bytes(2, "little")
    ours, theirs = decode_shard(payload), decode_shard(golden)
    assert ours.k.tobytes() == theirs.k.tobytes() and ours.v.tobytes() == theirs.v.tobytes()


def test_full_golden_is_the_input_itself():
    pair, _ = golden_input()
    out = decode_shard(_path("full").read_bytes())
    assert out.k.tobytes() == pair.k.tobytes() and out.v.tobytes() == pair.v.tobytes()


def _write() -> None:
    pair, scores = golden_input()
    arrays = {}
    for level in LEVELS:
        payload = encode_shard(pair, default_levels()[level], scores)
        _path(level).write_bytes(payload)
        out = decode_shard(payload)
        arrays[f"{level}_k"], arrays[f"{level}_v"] = out.k, out.v
    np.savez(GOLDEN / f"shard-v{FORMAT_VERSION}-expected.npz", **arrays)


if __name__ == "__main__" and "--write" in sys.argv:
    _write()
