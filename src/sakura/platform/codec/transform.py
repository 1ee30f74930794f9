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
from sakura.platform.codec.distortion import OutputError, QueryProbe, surrogate_probe
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


def encode_transforms(pairs: Sequence[KVPair], levels: Sequence[LevelSpec], importance: Sequence[np.ndarray | None],
                      probes: Sequence[QueryProbe | None]) -> list[list[bytes]]:
    """The payloads of ``pairs`` at each transform level of ``levels``, in order. Levels that fit
    and compress alike share each unit's ladder, walked once to the finest level's end: a coarser
    level's ladder is a prefix of a finer one's (it ends at the first rung negligible to it)."""
    for level in levels:
        if level.transform is None:
            raise CodecError(f"level {level.name!r} has no transform")
    meters = []
    for pair, scores, probe in zip(pairs, importance, probes, strict=True):
        _check(pair, scores)
        meters.append(OutputError(probe if probe is not None else surrogate_probe(pair.k), pair.k, pair.v))
    out: list[list[bytes]] = [[] for _ in levels]
    for group in _alike(levels):
        spec, zstd_level = levels[group[0]].transform, levels[group[0]].zstd_level
        assert spec is not None
        finest = min(levels[i].transform.target for i in group)  # type: ignore[union-attr]
        ladders = [_ladder(pair, which, _weights(scores, spec.weighted), meter, finest**2, zstd_level)
                   for pair, scores, meter in zip(pairs, importance, meters) for which in (0, 1)]
        for i in group:
            out[i] = _encode_level(pairs, levels[i], ladders)
    return out


def _alike(levels: Sequence[LevelSpec]) -> list[list[int]]:
    """Indexes of ``levels`` grouped by what their ladders depend on: the fit's weighting and zstd's level."""
    groups: dict[tuple[bool, int], list[int]] = {}
    for i, level in enumerate(levels):
        assert level.transform is not None
        groups.setdefault((level.transform.weighted, level.zstd_level), []).append(i)
    return list(groups.values())


def _weights(scores: np.ndarray | None, weighted: bool) -> np.ndarray | None:
    """Token weights of a weighted fit: scores rank rows, higher first, and only their non-negative part counts."""
    return np.clip(scores, 0.0, None).sum(axis=0) if weighted and scores is not None else None


def _encode_level(pairs: Sequence[KVPair], level: LevelSpec, ladders: list[list[_Coded]]) -> list[bytes]:
    """``pairs`` at ``level``, each unit's coding chosen from its ladder (cut where the level's target ends it)."""
    spec = level.transform
    assert spec is not None
    ladders = [_prefix(ladder, spec.target**2) for ladder in ladders]
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


def _ladder(pair: KVPair, which: int, weights: np.ndarray | None, meter: OutputError, budget: float,
            zstd_level: int) -> list[_Coded]:
    """Unit ``which`` (0: K, 1: V) of ``pair`` at every rung, coarse to fine, until negligible."""
    x = (pair.k, pair.v)[which]
    heads, tokens, head_dim = x.shape
    f = lowrank.fit(joint(x), weights)
    error_of = meter.of_keys if which == 0 else meter.of_values
    out: list[_Coded] = []
    for rung, relative in enumerate(LADDER):
        code = lowrank.quantise(f, relative * f.rms)
        coded = [code] if 2 * code.rank < f.width else [code, lowrank.quantise(f, relative * f.rms, identity=True)]
        for c in coded:
            error = error_of(c.factors().dense().reshape(tokens, heads, head_dim).transpose(1, 0, 2))
            frames = [(len(raw), compress(raw, zstd_level)) for raw in c.raw_sections()]
            nbytes = TENSOR.size + sum(SECTION.size + len(frame) for _, frame in frames)
            out.append(_Coded(c, frames, allocate.Option(nbytes, error, rung)))
        if f.rms == 0 or _negligible(out, rung, budget):
            break
    return out


def _negligible(ladder: list[_Coded], rung: int, budget: float) -> bool:
    """Whether a coding at ``rung`` errs by less than is negligible for ``budget``: finer rungs cannot matter."""
    return min(c.option.distortion for c in ladder if c.option.rung == rung) < NEGLIGIBLE * budget


def _prefix(ladder: list[_Coded], budget: float) -> list[_Coded]:
    """``ladder`` up to the rung where :func:`_ladder` would have stopped for ``budget``."""
    for rung in sorted({c.option.rung for c in ladder}):
        if _negligible(ladder, rung, budget):
            return [c for c in ladder if c.option.rung <= rung]
    return ladder
