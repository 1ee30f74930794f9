"""Baseline KV codecs for bench/codec.py, written from their published descriptions (CacheGen's
lives in :mod:`sakura.evaluation.cachegen`, shared with the end-to-end comparison).

Each ``roundtrip`` returns the encoded size in bytes and the decoded K/V, timing both halves.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import zstandard

from sakura.evaluation.cachegen import Roundtrip
from sakura.platform.codec import LevelSpec, QueryProbe, decode_shard, encode_shards, peek_header
from sakura.platform.codec.format_v2 import LowRankHeader
from sakura.platform.kv import KVPair, ShardKey

_Z = zstandard.ZstdCompressor(level=9)
_D = zstandard.ZstdDecompressor()


class Method(Protocol):
    name: str
    description: str

    def roundtrip(self, pair: KVPair, key: ShardKey, importance: np.ndarray, layers: int) -> Roundtrip: ...


def _timed(fn: Callable[[], object]) -> tuple[object, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


@dataclass
class TemplateTrip:
    """A template's shards through a SAKURA level: each round trip, the seconds decoding to factors
    took, and each version 2 shard's (K, V) rank (None: the identity basis)."""

    trips: list[Roundtrip]
    factored_s: float
    ranks: list[tuple[int | None, int | None]]


@dataclass
class SakuraLevel:
    """SAKURA's own codec at a level; ``random_ranking`` makes it importance-blind. A template's
    shards are encoded together, as the build does (a transform level spreads its error over
    them, measured on ``probes``: each shard's calibration queries)."""

    name: str
    level: LevelSpec
    random_ranking: bool = False
    description: str = ""

    def roundtrip(self, pair: KVPair, key: ShardKey, importance: np.ndarray, layers: int) -> Roundtrip:
        return self.roundtrip_template([pair], [key], [importance], None)[0][0]

    def roundtrip_template(self, pairs: list[KVPair], keys: list[ShardKey], importance: list[np.ndarray],
                           probes: list[QueryProbe | None] | None) -> TemplateTrip:
        """Each shard's round trip, the seconds decoding them to factors took (the form the phone
        attends to; for version 1 payloads the same as decoding), and version 2's ranks."""
        scores = [self._ranking(key, s) for key, s in zip(keys, importance)]
        payloads, enc = _timed(lambda: encode_shards(pairs, self.level, scores, probes))
        out = TemplateTrip([], 0.0, [])
        for payload in payloads:  # type: ignore[attr-defined]
            pair, dec = _timed(lambda p=payload: decode_shard(p))
            _, fac = _timed(lambda p=payload: decode_shard(p, factored=True))
            out.trips.append(Roundtrip(len(payload), pair, enc / len(pairs), dec))
            out.factored_s += fac
            header = peek_header(payload)
            if isinstance(header, LowRankHeader):
                out.ranks.append(tuple(t.rank if t.basis else None for t in header.tensors))  # type: ignore[arg-type]
        return out

    def _ranking(self, key: ShardKey, importance: np.ndarray) -> np.ndarray:
        if not self.random_ranking:
            return importance
        seed = (key.layer + 1) * 1000 + (0 if key.step is None else key.step)
        return np.random.default_rng(seed).random(importance.shape)


def _minmax(x: np.ndarray, bits: int, axis: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lo, hi = x.min(axis=axis, keepdims=True), x.max(axis=axis, keepdims=True)
    scale = (hi - lo) / (2**bits - 1)
    scale = np.where(scale > 0, scale, 1.0).astype(np.float16)
    codes = np.clip(np.rint((x - lo) / scale.astype(np.float32)), 0, 2**bits - 1).astype(np.uint8)
    return codes, scale, lo.astype(np.float16)


def _pack4(codes: np.ndarray) -> bytes:
    flat = codes.ravel()
    flat = np.concatenate([flat, np.zeros(len(flat) % 2, np.uint8)])
    return (flat[0::2] | (flat[1::2] << 4)).tobytes()


def _unpack4(data: bytes, n: int) -> np.ndarray:
    b = np.frombuffer(data, np.uint8)
    return np.stack([b & 15, b >> 4], axis=1).ravel()[:n]


@dataclass
class UniformInt8:
    """Symmetric absmax int8 per (head, token) row with fp16 scales, then zstd."""

    name: str = "int8"
    description: str = "uniform int8, per-token absmax, zstd"

    def roundtrip(self, pair: KVPair, key: ShardKey, importance: np.ndarray, layers: int) -> Roundtrip:
        def enc() -> list[bytes]:
            out = []
            for x in (pair.k.astype(np.float32), pair.v.astype(np.float32)):
                scale = (np.abs(x).max(axis=-1, keepdims=True) / 127.0).astype(np.float16)
                scale = np.where(scale > 0, scale, np.float16(1.0))
                out += [_Z.compress(np.rint(x / scale.astype(np.float32)).astype(np.int8).tobytes()), scale.tobytes()]
            return out

        def dec(blobs: list[bytes]) -> KVPair:
            xs = []
            for codes, scale in ((blobs[0], blobs[1]), (blobs[2], blobs[3])):
                c = np.frombuffer(_D.decompress(codes), np.int8).reshape(pair.k.shape).astype(np.float32)
                s = np.frombuffer(scale, np.float16).reshape(pair.k.shape[:2] + (1,)).astype(np.float32)
                xs.append((c * s).astype(pair.k.dtype))
            return KVPair(*xs)

        blobs, enc_s = _timed(enc)
        out, dec_s = _timed(lambda: dec(blobs))
        return Roundtrip(sum(map(len, blobs)), out, enc_s, dec_s)


@dataclass
class KiviInt4:
    """KIVI-style int4: keys per channel over groups of 64 tokens, values per token; zstd."""

    name: str = "int4-kivi"
    description: str = "uniform int4, K per-channel (64-token groups), V per-token, zstd"
    group: int = 64

    def roundtrip(self, pair: KVPair, key: ShardKey, importance: np.ndarray, layers: int) -> Roundtrip:
        heads, tokens, dim = pair.k.shape

        def enc() -> list[bytes]:
            k = pair.k.astype(np.float32)
            groups = [_minmax(k[:, g : g + self.group], 4, axis=1) for g in range(0, tokens, self.group)]
            v_codes, v_scale, v_zero = _minmax(pair.v.astype(np.float32), 4, axis=2)
            k_codes = np.concatenate([c for c, _, _ in groups], axis=1)
            k_meta = b"".join(s.tobytes() + z.tobytes() for _, s, z in groups)
            return [_Z.compress(_pack4(k_codes)), k_meta, _Z.compress(_pack4(v_codes)),
                    v_scale.tobytes() + v_zero.tobytes()]

        def dec(blobs: list[bytes]) -> KVPair:
            n = heads * tokens * dim
            k_codes = _unpack4(_D.decompress(blobs[0]), n).reshape(heads, tokens, dim).astype(np.float32)
            meta = np.frombuffer(blobs[1], np.float16).astype(np.float32)
            k = np.empty((heads, tokens, dim), np.float32)
            per = heads * dim
            for i, g in enumerate(range(0, tokens, self.group)):
                s = meta[2 * i * per : (2 * i + 1) * per].reshape(heads, 1, dim)
                z = meta[(2 * i + 1) * per : (2 * i + 2) * per].reshape(heads, 1, dim)
                k[:, g : g + self.group] = k_codes[:, g : g + self.group] * s + z
            v_codes = _unpack4(_D.decompress(blobs[2]), n).reshape(heads, tokens, dim).astype(np.float32)
            vm = np.frombuffer(blobs[3], np.float16).astype(np.float32)
            vs, vz = vm[: heads * tokens].reshape(heads, tokens, 1), vm[heads * tokens :].reshape(heads, tokens, 1)
            return KVPair(k.astype(pair.k.dtype), (v_codes * vs + vz).astype(pair.k.dtype))

        blobs, enc_s = _timed(enc)
        out, dec_s = _timed(lambda: dec(blobs))
        return Roundtrip(sum(map(len, blobs)), out, enc_s, dec_s)
