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


def resign(payload: bytes) -> bytes:
    """Replace the trailing checksum so a mutation reaches the parser behind it."""
    body = payload[:-32]
    return body + hashlib.sha256(body).digest()


@pytest.fixture
def pair() -> KVPair:
    return make_pair()
