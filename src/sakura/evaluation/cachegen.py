"""CacheGen (Liu et al., SIGCOMM'24) as its published encoder does it, applied to DiT template KV:
the baseline codec of the end-to-end comparison and of ``bench/codec.py``.

Sources (LMCache/LMCache, whose CacheGen serde CacheGen's artifact ships as its codec):

* ``lmcache/storage_backend/serde/cachegen_encoder.py`` (commit ``19dce33f``):
  ``torch_quant_vectorized`` (quantiser) and ``encode_function``: one CDF per layer and channel
  over the chunk's tokens, one arithmetic-coded stream per layer, channel and 256 tokens;
  ``lmcache/storage_backend/serde/cachegen_basics.py`` (``45ebf009``): the 256-token stream
  limit ``CACHEGEN_GPU_MAX_TOKENS_PER_CHUNK`` and the shipped ``CacheGenGPUEncoderOutput``
  (streams, int32 stream lengths, the int16 CDF, per-token maxes in the KV's 16-bit dtype);
  ``lmcache/storage_backend/serde/cachegen_decoder.py`` (``efa2f723``): ``do_dequantize``;
* ``csrc/cal_cdf.cu`` (``calculate_cdf``: counts normalised to ``0xFFFF - max_bins`` plus an
  arange) and ``csrc/ac_enc.cu`` (32-bit range coder, 16-bit CDF precision), both ``0e65d2fc``;
* UChi-JCL/CacheGen ``LMCache/lmcache/storage_backend/serde/cachegen_basics.py`` (``a3581bb5``):
  the three ``QUANT_LEVEL`` configurations its adaptation chooses between, and ``src/utils.py``
  (same commit): ``config_selection``, the streaming rule of :func:`select_config`.

What changed from the earlier model written from the paper: the code has no anchor/delta step
(the paper's token-wise locality; LMCache issue #1841 and UChi-JCL/CacheGen issue #6 note its
absence), quantises each token by its absmax over all heads' channels instead of per-channel
std bins, and ships a fixed 33-entry (``max bins + 1``) int16 CDF per layer-channel-chunk rather
than a count per used symbol.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sakura.platform.kv import KVPair, ShardKey

#: Tokens per arithmetic-coded stream (``CACHEGEN_GPU_MAX_TOKENS_PER_CHUNK``); each ships an int32 length.
STREAM_TOKENS = 256
#: The coder's CDF precision (``PRECISION`` in ``ac_enc.cu``): CDF values lie in ``[0, 2**16)``.
PRECISION = 16
#: Bits a stream spends beyond its symbols' code length: the coder's flush (one bit plus a pending one).
FLUSH_BITS = 2
#: Layer-group boundaries of the published configurations, as fractions of the model's 32 layers:
#: keys ``key_first_layers=10``, ``key_second_layers=20``; values ``value_first_layers=2``.
KEY_GROUPS, VALUE_GROUPS, PUBLISHED_LAYERS = (10, 20), (2,), 32


@dataclass
class Roundtrip:
    nbytes: int
    pair: KVPair
    encode_s: float
    decode_s: float


@dataclass(frozen=True)
class SizeBreakdown:
    """Bytes one shard costs, by what the published encoder ships for it."""

    cdf: int  # int16 CDF, (max bins + 1) entries per channel, K and V
    maxes: int  # one 16-bit absmax per token, K and V
    lengths: int  # one int32 length per stream
    streams: int  # the arithmetic-coded symbols

    @property
    def total(self) -> int:
        return self.cdf + self.maxes + self.lengths + self.streams


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def _group(layer: int, layers: int, bounds: tuple[int, ...]) -> int:
    """Which published layer group ``layer`` falls in, the boundaries scaled to ``layers``."""
    return sum(PUBLISHED_LAYERS * layer >= b * max(1, layers) for b in bounds)


def _channels(x: np.ndarray) -> np.ndarray:
    """(heads, tokens, head_dim) -> (tokens, heads*head_dim), the encoder's merged channels, in fp16
    as the serving engine holds KV (LMCache never sees fp32 KV)."""
    heads, tokens, dim = x.shape
    return x.astype(np.float16).transpose(1, 0, 2).reshape(tokens, heads * dim).astype(np.float32)


def quantise(x: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """``torch_quant_vectorized``: symbols ``rint(x * C/max + C)`` in ``[0, 2C]``, C = bins//2 - 1,
    max the token's absmax over all channels (16-bit, as the KV); an all-zero token gets max 1
    (LMCache would divide by zero) so it decodes to zeros."""
    c = np.float32(bins // 2 - 1)
    maxes = np.abs(x).max(axis=-1, keepdims=True).astype(np.float16)
    maxes[maxes == 0] = 1
    symbols = np.rint(x * (c / maxes.astype(np.float32)) + c)
    return symbols.astype(np.uint8), maxes


def dequantise(symbols: np.ndarray, maxes: np.ndarray, bins: int) -> np.ndarray:
    """``do_dequantize``: ``(s - C) / C * max`` in float32."""
    c = np.float32(bins // 2 - 1)
    return (symbols.astype(np.float32) - c) / c * maxes.astype(np.float32)


def shipped_cdf(symbols: np.ndarray, max_bins: int) -> np.ndarray:
    """``calculate_cdf``: per channel, ``floor((0xFFFF - max_bins) * #(s < k) / n) + k`` for
    ``k = 0..max_bins``; (channels, max_bins + 1) uint16 (shipped as int16)."""
    tokens, channels = symbols.shape
    counts = np.zeros((channels, max_bins + 1), np.int64)
    np.add.at(counts, (np.arange(channels)[None, :], symbols.astype(np.int64) + 1), 1)
    below = np.cumsum(counts, axis=1)
    return ((0xFFFF - max_bins) * below // tokens + np.arange(max_bins + 1)).astype(np.uint16)


def code_bits(cdf: np.ndarray) -> np.ndarray:
    """Bits the coder spends on each symbol under ``cdf``: ``16 - log2(width)``, the last codable
    symbol (``max_bins - 1``) reaching up to ``2**16`` as in ``ac_enc.cu``."""
    top = np.full((cdf.shape[0], 1), 1 << PRECISION, np.int64)
    widths = np.diff(np.concatenate([cdf[:, :-1].astype(np.int64), top], axis=1), axis=1)
    return PRECISION - np.log2(widths)


def stream_bytes(symbols: np.ndarray, cdf: np.ndarray) -> int:
    """Bytes of the coded streams: per channel and 256 tokens, the symbols' code length under the
    shipped CDF plus the flush, rounded up to whole bytes (the coder pads its last byte)."""
    bits = code_bits(cdf)
    channel = np.arange(symbols.shape[1])[None, :]
    total = 0
    for start in range(0, symbols.shape[0], STREAM_TOKENS):
        block = symbols[start : start + STREAM_TOKENS].astype(np.int64)
        ideal = bits[channel, block].sum(axis=0)
        total += int(np.ceil((ideal + FLUSH_BITS) / 8).sum())
    return total


@dataclass(frozen=True)
class _Encoded:
    symbols: np.ndarray
    maxes: np.ndarray
    bins: int
    size: SizeBreakdown


@dataclass
class CacheGenStyle:
    """One published CacheGen configuration: bins per layer group for keys (three groups) and values
    (two), the groups scaled from the published 32 layers to the model's. A shard is one CacheGen
    chunk: one CDF per channel over all its tokens, streams of 256 tokens. The size is what the
    encoder ships (:class:`SizeBreakdown`; pickle framing not charged); the streams are sized as the
    symbols' code length under the shipped, quantised CDF (what the range coder reaches to within a
    byte per stream) rather than coded; decode times the dequantisation only, not the decoder."""

    name: str
    key_bins: tuple[int, int, int]
    value_bins: tuple[int, int]
    description: str = "CacheGen (LMCache): per-token absmax bins by layer group, per-channel CDF, arithmetic coding"

    def bins(self, layer: int, layers: int) -> tuple[int, int]:
        """(key bins, value bins) of ``layer`` in a model of ``layers`` layers."""
        return (self.key_bins[_group(layer, layers, KEY_GROUPS)],
                self.value_bins[_group(layer, layers, VALUE_GROUPS)])

    def roundtrip(self, pair: KVPair, key: ShardKey, importance: np.ndarray, layers: int) -> Roundtrip:
        encoded, enc_s = _timed(lambda: self._encode(pair, key.layer, layers))
        out, dec_s = _timed(lambda: [_decode(e, pair.k.shape).astype(pair.k.dtype) for e in encoded])
        return Roundtrip(sum(e.size.total for e in encoded), KVPair(*out), enc_s, dec_s)

    def breakdown(self, pair: KVPair, key: ShardKey, layers: int) -> SizeBreakdown:
        """What the shard's bytes are spent on, K and V together."""
        k, v = (e.size for e in self._encode(pair, key.layer, layers))
        return SizeBreakdown(k.cdf + v.cdf, k.maxes + v.maxes, k.lengths + v.lengths, k.streams + v.streams)

    def _encode(self, pair: KVPair, layer: int, layers: int) -> list[_Encoded]:
        return [_encode(x, bins, max(table))
                for x, bins, table in zip((pair.k, pair.v), self.bins(layer, layers), (self.key_bins, self.value_bins))]


def _encode(x: np.ndarray, bins: int, max_bins: int) -> _Encoded:
    """One tensor; the CDF has ``max_bins + 1`` entries, ``max_bins`` the configuration's largest
    bins for that tensor (``calculate_cdf(new_key, int(key_bins.max()))``)."""
    symbols, maxes = quantise(_channels(x), bins)
    cdf = shipped_cdf(symbols, max_bins)
    tokens, channels = symbols.shape
    streams = channels * -(-tokens // STREAM_TOKENS)
    size = SizeBreakdown(cdf.nbytes, maxes.nbytes, 4 * streams, stream_bytes(symbols, cdf))
    return _Encoded(symbols, maxes, bins, size)


def _decode(e: _Encoded, shape: tuple[int, ...]) -> np.ndarray:
    heads, tokens, dim = shape
    return dequantise(e.symbols, e.maxes, e.bins).reshape(tokens, heads, dim).transpose(1, 0, 2)


#: The published ladder, smallest first: UChi-JCL/CacheGen's ``QUANT_LEVEL`` 1, 2 and 3 (level 2 is
#: LMCache's default ``CacheGenConfig``; level 3 keeps 32 bins everywhere).
CACHEGEN_LEVELS: tuple[CacheGenStyle, ...] = (
    CacheGenStyle("cachegen-low", key_bins=(16, 16, 12), value_bins=(16, 12)),
    CacheGenStyle("cachegen-coarse", key_bins=(32, 16, 16), value_bins=(32, 16)),
    CacheGenStyle("cachegen-fine", key_bins=(32, 32, 32), value_bins=(32, 32)),
)


def select_config(chunk_bytes: Mapping[str, int], throughput_bytes_per_s: float, budget_s: float,
                  ladder: Sequence[str]) -> str | None:
    """CacheGen's streaming adaptation (``config_selection`` in UChi-JCL/CacheGen ``src/utils.py``):
    for one chunk, the finest configuration of ``ladder`` (smallest first) whose transfer at the
    chunk's throughput takes strictly less than ``budget_s``; ``None`` when none does, meaning the
    text fallback: recompute that chunk (the artifact charges a fixed ``chunk_delay`` of 0.2 s).

    The budget is fixed, ``SLO / num_chunks`` with ``num_chunks = round(tokens / chunk_size)``, not
    the remaining deadline over the remaining chunks; the artifact takes the throughput as the
    bandwidth trace's value for that chunk (``all_bws[chunk_id]``).
    """
    for level in reversed(ladder):
        if chunk_bytes[level] / throughput_bytes_per_s < budget_s:
            return level
    return None
