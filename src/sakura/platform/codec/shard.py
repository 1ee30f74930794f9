"""Encode shards at a level; decode any payload back to K and V (or their factors)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, overload

import numpy as np

from sakura.platform.codec import lowrank, quant
from sakura.platform.codec.container import DTYPE_CODES, Expectation, from_planes, to_planes
from sakura.platform.codec.distortion import QueryProbe
from sakura.platform.codec.format import (
    KIND_LOSSLESS,
    KIND_QUANTIZED,
    ShardHeader,
    read_payload,
    write_payload,
)
from sakura.platform.codec.format_v2 import LowRankHeader
from sakura.platform.codec.levels import LevelSpec
from sakura.platform.codec.transform import encode_transforms
from sakura.platform.errors import CodecError
from sakura.platform.importance import key_norm_scores
from sakura.platform.kv import FactoredPair, KVPair, KVShard, LowRank


def encode_shards(pairs: Sequence[KVPair], level: LevelSpec, importance: Sequence[np.ndarray | None] | None = None,
                  probes: Sequence[QueryProbe | None] | None = None) -> list[bytes]:
    """Encode a template's shards at ``level``, together: a transform level spreads its target's
    error over them (:mod:`~sakura.platform.codec.transform`), measured on ``probes`` (each shard's
    calibration queries; None: its own keys stand in). ``importance`` scores each shard's (head,
    token) rows, higher is more important."""
    return encode_levels(pairs, [level], importance, probes)[level.name]


def encode_levels(pairs: Sequence[KVPair], levels: Sequence[LevelSpec],
                  importance: Sequence[np.ndarray | None] | None = None,
                  probes: Sequence[QueryProbe | None] | None = None) -> dict[str, list[bytes]]:
    """:func:`encode_shards` at every level of ``levels``, by level name: the same payloads, with
    the work transform levels share (fits, error measurements, codings) done once."""
    importance = [None] * len(pairs) if importance is None else list(importance)
    transforms = [level for level in levels if level.transform is not None]
    coded: dict[str, list[bytes]] = {}
    if transforms:
        probes = [None] * len(pairs) if probes is None else list(probes)
        scores = [None if s is None else np.asarray(s, np.float32) for s in importance]
        coded.update(zip((level.name for level in transforms), encode_transforms(pairs, transforms, scores, probes)))
    for level in levels:
        if level.name not in coded:
            coded[level.name] = [_encode_v1(pair, level, scores)
                                 for pair, scores in zip(pairs, importance, strict=True)]
    return {level.name: coded[level.name] for level in levels}


def encode_shard(pair: KVPair, level: LevelSpec, importance: np.ndarray | None = None,
                 probe: QueryProbe | None = None) -> bytes:
    """Encode K and V of shape (heads, tokens, head_dim) at ``level``, as a template of one shard.

    ``importance`` scores each (head, token) row, higher is more important; without it the
    rows are ranked by key norm (see :mod:`sakura.platform.importance`).
    """
    return encode_shards([pair], level, [importance], [probe])[0]


def _encode_v1(pair: KVPair, level: LevelSpec, importance: np.ndarray | None) -> bytes:
    dtype = pair.k.dtype
    if dtype not in DTYPE_CODES:
        raise CodecError(f"cannot encode dtype {dtype}; use float16 or float32")
    heads, tokens, head_dim = pair.k.shape
    if level.lossless:
        header = ShardHeader(dtype, KIND_LOSSLESS, False, heads, tokens, head_dim, 1.0, level.name, ())
        sections = [np.ascontiguousarray(pair.k).tobytes(), np.ascontiguousarray(pair.v).tobytes()]
        return write_payload(header, sections, level.zstd_level)
    if not (np.isfinite(pair.k).all() and np.isfinite(pair.v).all()):
        raise CodecError("cannot quantise non-finite K/V values")
    scores = key_norm_scores(pair.k) if importance is None else np.asarray(importance, dtype=np.float32)
    if scores.shape != (heads, tokens):
        raise CodecError(f"importance has shape {scores.shape}, expected {(heads, tokens)}")
    classes = quant.assign_classes(scores, [c.fraction for c in level.classes])
    class_bits = np.array([c.bits for c in level.classes], dtype=np.float32)
    row_step = quant.step_ratio(class_bits, level.kappa)[classes]
    rotated = level.rotate and quant.can_rotate(head_dim)
    stats: list[np.ndarray] = []
    planes: list[np.ndarray] = []
    for x in (pair.k, pair.v):
        x = x.astype(np.float32)
        if rotated:
            x = x @ quant.hadamard(head_dim)
        mean, std = quant.channel_stats(x)
        stats += [mean, std]
        planes += to_planes(quant.quantize(x, mean, std, row_step))
    header = ShardHeader(dtype, KIND_QUANTIZED, rotated, heads, tokens, head_dim, float(level.kappa), level.name,
                         tuple(float(b) for b in class_bits))
    sections = [np.concatenate([s.ravel() for s in stats]).astype("<f4").tobytes(), classes.tobytes(),
                *(p.tobytes() for p in planes)]
    return write_payload(header, sections, level.zstd_level)


@overload
def decode_shard(data: bytes, *, expected_shape: tuple[int, int, int] | None = None,
                 expected_dtype: np.dtype | None = None, max_output_bytes: int | None = None,
                 factored: Literal[False] = False) -> KVPair: ...


@overload
def decode_shard(data: bytes, *, expected_shape: tuple[int, int, int] | None = None,
                 expected_dtype: np.dtype | None = None, max_output_bytes: int | None = None,
                 factored: bool) -> KVShard: ...


def decode_shard(
    data: bytes,
    *,
    expected_shape: tuple[int, int, int] | None = None,
    expected_dtype: np.dtype | None = None,
    max_output_bytes: int | None = None,
    factored: bool = False,
) -> KVShard:
    """Decode a payload. Any malformed, truncated or hostile input raises :class:`CodecError`.

    The expectations are checked on the header, before any section is decompressed: a caller
    that knows its model passes them all, so a payload can never make it allocate more. With
    ``factored``, a version 2 payload decodes to its factors (:class:`FactoredPair`), which replay
    may attend to without rebuilding K and V; other payloads decode to K and V all the same.
    """
    try:
        header, sections = read_payload(data, Expectation(expected_shape, expected_dtype, max_output_bytes))
        if isinstance(header, LowRankHeader):
            with np.errstate(over="ignore", invalid="ignore"):
                return _factors(header, sections, dense=not factored)
        assert isinstance(header, ShardHeader)
        if header.kind == KIND_LOSSLESS:
            k, v = (np.frombuffer(s, dtype=header.dtype.newbyteorder("<")).reshape(header.shape) for s in sections)
            pair = KVPair(k.astype(header.dtype), v.astype(header.dtype))
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                pair = _dequantize(header, sections)
        _check_finite(pair)
        return pair
    except CodecError:
        raise
    except Exception as exc:  # a safety net: no other exception type may escape the decoder
        raise CodecError(f"malformed shard payload: {type(exc).__name__}: {exc}") from None


def _check_finite(pair: KVPair) -> None:
    if not (np.isfinite(pair.k).all() and np.isfinite(pair.v).all()):
        raise CodecError("shard decodes to non-finite values")


def _factors(header: LowRankHeader, sections: list[bytes], *, dense: bool) -> KVShard:
    """A version 2 payload's K and V (``dense``) or factors; either is checked finite."""
    split = len(sections) - (4 if header.tensors[1].basis else 2)
    parts = (sections[:split], sections[split:])
    codes = [lowrank.from_sections(t, part, header.tokens, header.width) for t, part in zip(header.tensors, parts)]
    factors = FactoredPair(codes[0].factors(), codes[1].factors(), header.heads, header.dtype)
    if dense or not all(_surely_finite(f, header.dtype) for f in (factors.k_factors, factors.v_factors)):
        pair = factors.dense()
        _check_finite(pair)
        if dense:
            return pair
    return factors


def _surely_finite(x: LowRank, dtype: np.dtype) -> bool:
    """Whether every entry of ``x`` is certainly finite in ``dtype``: a bound from the factors alone,
    without rebuilding ``x`` (where it fails, the caller rebuilds and checks)."""
    if not (np.isfinite(x.coefficients).all() and np.isfinite(x.mean).all()):
        return False
    if x.basis is None:
        largest = float(np.abs(x.coefficients).max(initial=0.0))
    else:
        if not np.isfinite(x.basis).all():
            return False
        row_max = np.abs(x.basis).max(axis=1, initial=0.0).astype(np.float64)
        largest = float((np.abs(x.coefficients).astype(np.float64) @ row_max).max(initial=0.0))
    return largest + float(np.abs(x.mean).max(initial=0.0)) < float(np.finfo(dtype).max)


def _dequantize(header: ShardHeader, sections: list[bytes]) -> KVPair:
    heads, tokens, head_dim = header.shape
    stats = np.frombuffer(sections[0], dtype="<f4").reshape(4, heads, head_dim)
    if not np.isfinite(stats).all() or (stats[1] <= 0).any() or (stats[3] <= 0).any():
        raise CodecError("shard statistics are not finite and positive")
    classes = np.frombuffer(sections[1], dtype=np.uint8).reshape(heads, tokens)
    if int(classes.max()) >= len(header.class_bits):
        raise CodecError("a row refers to a precision class the shard does not define")
    row_step = quant.step_ratio(np.array(header.class_bits, dtype=np.float32), header.kappa)[classes]
    planes = [np.frombuffer(s, dtype=np.uint8).reshape(header.shape) for s in sections[2:]]
    out = []
    for i, (low, high) in enumerate(((planes[0], planes[1]), (planes[2], planes[3]))):
        x = quant.dequantize(from_planes(low, high), stats[2 * i], stats[2 * i + 1], row_step)
        if header.rotated:
            x = x @ quant.hadamard(head_dim).T
        out.append(x.astype(header.dtype))
    return KVPair(out[0], out[1])
