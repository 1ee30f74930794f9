"""Encoding shards at a transform level (wire format v2).

Each shard's K and V is a *unit*. Every unit is fitted once (:func:`lowrank.fit`, a PCA weighted
by token importance when the level says so) and coded along a ladder of steps relative to its
own scale; each rung is measured (bytes on the wire, and the squared relative attention-output
error it alone causes on the shard's probe queries). The level's target then buys the fewest
bytes: the units' summed error may reach ``shards x target^2`` (:mod:`allocate`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sakura.platform.codec import allocate, lowrank
from sakura.platform.codec.container import DTYPE_CODES, SECTION, compress
from sakura.platform.codec.distortion import QueryProbe, surrogate_probe
from sakura.platform.codec.format_v2 import TENSOR, LowRankHeader, write_payload
from sakura.platform.codec.levels import LevelSpec
from sakura.platform.errors import CodecError
from sakura.platform.kv import KVPair

#: Steps tried, relative to a tensor's RMS about its mean: 8x down to 2^-10.5, by half-octaves
#: (an estimate: the coarsest drops nearly everything, the finest is below any lossy target).
LADDER = tuple(2.0 ** ((6 - i) / 2) for i in range(28))
#: A rung whose error is below this share of the per-shard budget ends the ladder: finer ones
#: cannot matter (an estimate).
NEGLIGIBLE = 1e-3


@dataclass(frozen=True)
class _Coded:
    """One rung of one unit: its codes, their compressed sections, and what they cost."""

    code: lowrank.TensorCode
    frames: list[tuple[int, bytes]]
    option: allocate.Option


def encode_transform(pairs: Sequence[KVPair], level: LevelSpec, importance: Sequence[np.ndarray | None],
                     probes: Sequence[QueryProbe | None]) -> list[bytes]:
    """The payloads of ``pairs`` (a template's shards, or one) at transform level ``level``."""
    spec = level.transform
    if spec is None:
        raise CodecError(f"level {level.name!r} has no transform")
    ladders: list[list[_Coded]] = []
    for pair, scores, probe in zip(pairs, importance, probes, strict=True):
        _check(pair, scores)
        probe = probe if probe is not None else surrogate_probe(pair.k)
        exact = probe.output(pair.k, pair.v)
        # Scores rank rows, higher first; as token weights only their non-negative part counts.
        weights = np.clip(scores, 0.0, None).sum(axis=0) if spec.weighted and scores is not None else None
        for which in (0, 1):
            ladders.append(_ladder(pair, which, weights, probe, exact, spec.target**2, level.zstd_level))
    choose = allocate.marginal if spec.allocation == "marginal" else allocate.uniform
    picks = choose([[c.option for c in ladder] for ladder in ladders], len(pairs) * spec.target**2)
    chosen = [ladder[i] for ladder, i in zip(ladders, picks)]
    out = []
    for s, pair in enumerate(pairs):
        k, v = chosen[2 * s], chosen[2 * s + 1]
        heads, tokens, head_dim = pair.k.shape
        header = LowRankHeader(pair.k.dtype, heads, tokens, head_dim, level.name, (k.code.header, v.code.header))
        out.append(write_payload(header, [*k.frames, *v.frames]))
    return out


def _check(pair: KVPair, scores: np.ndarray | None) -> None:
    if pair.k.dtype not in DTYPE_CODES:
        raise CodecError(f"cannot encode dtype {pair.k.dtype}; use float16 or float32")
    if not (np.isfinite(pair.k).all() and np.isfinite(pair.v).all()):
        raise CodecError("cannot quantise non-finite K/V values")
    heads, tokens, _ = pair.k.shape
    if scores is not None and scores.shape != (heads, tokens):
        raise CodecError(f"importance has shape {scores.shape}, expected {(heads, tokens)}")
    if scores is not None and not np.isfinite(scores).all():
        raise CodecError("importance scores are not finite")


def joint(x: np.ndarray) -> np.ndarray:
    """(heads, tokens, head_dim) -> (tokens, heads x head_dim): the heads side by side."""
    heads, tokens, head_dim = x.shape
    return x.transpose(1, 0, 2).reshape(tokens, heads * head_dim)


def _ladder(pair: KVPair, which: int, weights: np.ndarray | None, probe: QueryProbe, exact: np.ndarray,
            budget: float, zstd_level: int) -> list[_Coded]:
    """Unit ``which`` (0: K, 1: V) of ``pair`` at every rung, coarse to fine, until negligible."""
    x = (pair.k, pair.v)[which]
    heads, tokens, head_dim = x.shape
    f = lowrank.fit(joint(x), weights)
    out: list[_Coded] = []
    for rung, relative in enumerate(LADDER):
        code = lowrank.quantise(f, relative * f.rms)
        coded = [code] if 2 * code.rank < f.width else [code, lowrank.quantise(f, relative * f.rms, identity=True)]
        for c in coded:
            rebuilt = c.factors().dense().reshape(tokens, heads, head_dim).transpose(1, 0, 2)
            error = probe.squared_error(exact, *((rebuilt, pair.v) if which == 0 else (pair.k, rebuilt)))
            frames = [(len(raw), compress(raw, zstd_level)) for raw in c.raw_sections()]
            nbytes = TENSOR.size + sum(SECTION.size + len(frame) for _, frame in frames)
            out.append(_Coded(c, frames, allocate.Option(nbytes, error, rung)))
        if f.rms == 0 or min(c.option.distortion for c in out[-len(coded):]) < NEGLIGIBLE * budget:
            break
    return out
