"""CacheGen adapted to DiT template KV (Liu et al., SIGCOMM'24), written from its description:
the baseline codec of the end-to-end comparison and of ``bench/codec.py``.

CacheGen streams KV in chunks, each at one of a few quantisation configurations, choosing per
chunk from measured throughput so the remaining chunks fit the remaining deadline.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from sakura.platform.kv import KVPair, ShardKey


@dataclass
class Roundtrip:
    nbytes: int
    pair: KVPair
    encode_s: float
    decode_s: float


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


@dataclass
class CacheGenStyle:
    """CacheGen adapted to DiT template KV (Liu et al., SIGCOMM'24), from its description.

    * token-wise locality: tokens in groups of 10; the group's first token (anchor) is coded
      finely, the others as deltas from it;
    * layer-wise quantisation: shallower layers get finer bins (three layer groups);
    * arithmetic coding with a distribution per (layer, channel): sized here as the ideal
      code length (empirical entropy per channel plus a 16-bit count per used symbol), which
      is charitable to CacheGen (no coder overhead is charged; decode time excludes it).
    """

    name: str
    bins: tuple[float, float, float]
    description: str = "CacheGen-style: anchor+delta, layer-group bins, per-channel entropy coding"
    group: int = 10
    anchor_step: float = 1 / 64

    def roundtrip(self, pair: KVPair, key: ShardKey, importance: np.ndarray, layers: int) -> Roundtrip:
        step = self.bins[min(2, 3 * key.layer // max(1, layers))]
        encoded, enc_s = _timed(lambda: [self._encode(x.astype(np.float32), step) for x in (pair.k, pair.v)])
        out, dec_s = _timed(lambda: [self._decode(*e) for e in encoded])
        nbytes = sum(self._size(e[0], e[1]) + e[2].nbytes + e[3].nbytes for e in encoded)
        return Roundtrip(nbytes, KVPair(out[0].astype(pair.k.dtype), out[1].astype(pair.k.dtype)), enc_s, dec_s)

    def _encode(self, x: np.ndarray, step: float):
        heads, tokens, dim = x.shape
        anchors_idx = np.arange(0, tokens, self.group)
        std = x.std(axis=1, keepdims=True).astype(np.float16).astype(np.float32) + 1e-6
        anchors = np.rint(x[:, anchors_idx] / (std * self.anchor_step)).astype(np.int32)
        anchor_vals = anchors * (std * self.anchor_step)
        ref = np.repeat(anchor_vals, self.group, axis=1)[:, :tokens]
        deltas = np.rint((x - ref) / (std * step)).astype(np.int32)
        deltas[:, anchors_idx] = 0
        return anchors, deltas, std.astype(np.float16), np.array([step], np.float32)

    def _decode(self, anchors, deltas, std16, step_arr) -> np.ndarray:
        std, step = std16.astype(np.float32), float(step_arr[0])
        tokens = deltas.shape[1]
        anchor_vals = anchors * (std * self.anchor_step)
        ref = np.repeat(anchor_vals, self.group, axis=1)[:, :tokens]
        return ref + deltas * (std * step)

    def _size(self, anchors: np.ndarray, deltas: np.ndarray) -> int:
        mask = np.ones(deltas.shape[1], bool)
        mask[:: self.group] = False
        bits = _entropy_bits(anchors) + _entropy_bits(deltas[:, mask])
        return int(np.ceil(bits / 8))


def _entropy_bits(codes: np.ndarray) -> float:
    """Ideal code length of (heads, tokens, dim) codes, one distribution per (head, channel), plus tables."""
    total = 0.0
    flat = codes.transpose(1, 0, 2).reshape(codes.shape[1], -1)
    for c in range(flat.shape[1]):
        _, counts = np.unique(flat[:, c], return_counts=True)
        p = counts / counts.sum()
        total += float(-(counts * np.log2(p)).sum()) + 16 * len(counts)
    return total


#: CacheGen's configuration ladder, smallest first: finer bins cost more bytes.
CACHEGEN_LEVELS: tuple[CacheGenStyle, ...] = (
    CacheGenStyle("cachegen-low", bins=(1.6, 2.2, 3.0)),
    CacheGenStyle("cachegen-coarse", bins=(0.8, 1.1, 1.5)),
    CacheGenStyle("cachegen-fine", bins=(0.35, 0.5, 0.7)),
)
