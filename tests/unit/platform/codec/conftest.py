from __future__ import annotations

import hashlib

import numpy as np
import pytest

from sakura.platform.kv import KVPair


def make_pair(heads: int = 4, tokens: int = 48, dim: int = 16, dtype=np.float16, seed: int = 0) -> KVPair:
    rng = np.random.default_rng(seed)
    k = rng.standard_normal((heads, tokens, dim)) * np.linspace(0.5, 3.0, dim)  # uneven channels
    v = rng.standard_normal((heads, tokens, dim))
    return KVPair(k.astype(dtype), v.astype(dtype))


def make_low_rank_pair(heads: int = 4, tokens: int = 64, dim: int = 16, rank: int = 3, dtype=np.float32,
                       seed: int = 0, noise: float = 0.0) -> KVPair:
    """K and V of rank ``rank`` over the heads' joint width (plus a mean and ``noise``), as the
    trained reference model's KV nearly is."""
    rng = np.random.default_rng(seed)

    def tensor() -> np.ndarray:
        joint = rng.standard_normal((tokens, rank)) @ rng.standard_normal((rank, heads * dim)) * 2.0
        joint += rng.standard_normal(heads * dim) + noise * rng.standard_normal((tokens, heads * dim))
        return joint.reshape(tokens, heads, dim).transpose(1, 0, 2).astype(dtype)

    return KVPair(tensor(), tensor())


def resign(payload: bytes) -> bytes:
    """Replace the trailing checksum so a mutation reaches the parser behind it."""
    body = payload[:-32]
    return body + hashlib.sha256(body).digest()


@pytest.fixture
def pair() -> KVPair:
    return make_pair()
