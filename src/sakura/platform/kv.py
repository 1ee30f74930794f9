"""The template KV container shared by the capture, codec, store and replay paths."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from sakura.platform.errors import ModelError


@functools.total_ordering
@dataclass(frozen=True)
class ShardKey:
    """One shard of template KV: the attention layer, and the denoising step it belongs to.

    ``step`` is ``None`` for models whose template KV does not depend on the timestep (template
    tokens get a fixed-timestep modulation), so such models need one shard per layer.
    """

    step: int | None
    layer: int

    def __post_init__(self) -> None:
        if self.step is not None and (not isinstance(self.step, int) or self.step < 0):
            raise ValueError(f"ShardKey.step must be a non-negative int or None, got {self.step!r}")
        if not isinstance(self.layer, int) or self.layer < 0:
            raise ValueError(f"ShardKey.layer must be a non-negative int, got {self.layer!r}")

    def __lt__(self, other: ShardKey) -> bool:  # None sorts before any step
        if not isinstance(other, ShardKey):
            return NotImplemented
        return (_step_order(self.step), self.layer) < (_step_order(other.step), other.layer)

    def __str__(self) -> str:
        step = "*" if self.step is None else str(self.step)
        return f"s{step}/l{self.layer}"


def _step_order(step: int | None) -> int:
    return -1 if step is None else step


def pass_shards(keys: list[ShardKey] | tuple[ShardKey, ...]) -> int:
    """Shards per pass of the reference tokens through the blocks, for ``keys`` in the order a
    model reads them: every shard where the KV does not depend on the step (one pass), else
    those of the first step (a pass per step)."""
    return sum(key.step == keys[0].step for key in keys) if keys else 0


@dataclass(frozen=True)
class KVPair:
    """Keys and values of the template tokens at one shard, as the attention kernel sees them.

    Both arrays have shape ``(heads, tokens, head_dim)``; keys are already normalised and
    rotated, so replay must use them as they are.
    """

    k: np.ndarray
    v: np.ndarray

    def __post_init__(self) -> None:
        if self.k.shape != self.v.shape or self.k.ndim != 3:
            raise ModelError(f"K and V must share a (heads, tokens, head_dim) shape: {self.k.shape} vs {self.v.shape}")
        if self.k.dtype != self.v.dtype:
            raise ModelError(f"K and V dtypes differ: {self.k.dtype} vs {self.v.dtype}")

    @property
    def nbytes(self) -> int:
        return int(self.k.nbytes + self.v.nbytes)


@dataclass(frozen=True)
class LowRank:
    """A ``tokens x width`` matrix as ``coefficients @ basis + mean`` (``basis`` None: the identity,
    ``coefficients`` being the matrix less its mean). The phone may attend to it in this form."""

    coefficients: np.ndarray  # (tokens, rank), float32
    basis: np.ndarray | None  # (rank, width), float32
    mean: np.ndarray  # (width,), float32

    @property
    def rank(self) -> int:
        return int(self.coefficients.shape[1])

    @property
    def width(self) -> int:
        return int(self.mean.shape[0])

    def dense(self) -> np.ndarray:
        """The matrix itself, float32."""
        x = self.coefficients if self.basis is None else self.coefficients @ self.basis
        return x + self.mean


@dataclass(frozen=True)
class FactoredPair:
    """One shard's keys and values as low-rank factors over the heads' joint width (``heads x
    head_dim``, the heads side by side): what a version 2 payload decodes to before K and V are
    rebuilt. :meth:`dense` rebuilds them."""

    k_factors: LowRank
    v_factors: LowRank
    heads: int
    dtype: np.dtype

    @property
    def shape(self) -> tuple[int, int, int]:
        tokens, width = self.k_factors.coefficients.shape[0], self.k_factors.width
        return (self.heads, tokens, width // self.heads)

    def dense(self) -> KVPair:
        heads, tokens, head_dim = self.shape

        def heads_first(x: LowRank) -> np.ndarray:
            return x.dense().reshape(tokens, heads, head_dim).transpose(1, 0, 2).astype(self.dtype)

        return KVPair(heads_first(self.k_factors), heads_first(self.v_factors))


#: A shard as replay may receive it: K and V, or their factors.
KVShard = KVPair | FactoredPair


def dense(shard: KVShard) -> KVPair:
    """K and V of a shard in either form."""
    return shard.dense() if isinstance(shard, FactoredPair) else shard


@dataclass
class TemplateKV:
    """All shards of one template's KV for one model."""

    model_fingerprint: str
    shards: dict[ShardKey, KVPair] = field(default_factory=dict)

    def __iter__(self) -> Iterator[ShardKey]:
        return iter(sorted(self.shards))

    def __len__(self) -> int:
        return len(self.shards)

    def __getitem__(self, key: ShardKey) -> KVPair:
        try:
            return self.shards[key]
        except KeyError:
            raise ModelError(f"template KV has no shard {key}") from None

    @property
    def keys(self) -> list[ShardKey]:
        return sorted(self.shards)

    @property
    def steps(self) -> list[int | None]:
        return sorted({k.step for k in self.shards}, key=_step_order)

    @property
    def layers(self) -> list[int]:
        return sorted({k.layer for k in self.shards})

    @property
    def template_tokens(self) -> int:
        first = next(iter(self.shards.values()), None)
        return 0 if first is None else int(first.k.shape[1])

    @property
    def dtype(self) -> np.dtype | None:
        first = next(iter(self.shards.values()), None)
        return None if first is None else first.k.dtype

    @property
    def nbytes(self) -> int:
        return sum(pair.nbytes for pair in self.shards.values())

    @property
    def nbytes_fp16(self) -> int:
        """Size of the KV stored as fp16: the baseline every compression ratio is quoted against."""
        return sum(pair.k.size * 2 * 2 for pair in self.shards.values())


@dataclass(frozen=True)
class KVGeometry:
    """What a model's template KV must look like for a schedule: the shards in the order replay
    reads them, and each shard's K (= V) shape and dtype. Derived from the model itself, so a
    client can check what a server sends before it allocates or decodes anything."""

    keys: tuple[ShardKey, ...]
    shape: tuple[int, int, int]  # (heads, template tokens, head_dim)
    dtype: np.dtype

    @property
    def shard_nbytes(self) -> int:
        """Bytes of one decoded shard (K and V)."""
        heads, tokens, head_dim = self.shape
        return 2 * heads * tokens * head_dim * self.dtype.itemsize


class KVSource(Protocol):
    """What replay reads template KV from: a whole :class:`TemplateKV`, or a stream whose
    ``__getitem__`` blocks until that shard has arrived (the edge client's pipeline)."""

    model_fingerprint: str

    @property
    def keys(self) -> list[ShardKey]: ...

    @property
    def template_tokens(self) -> int: ...

    def __getitem__(self, key: ShardKey) -> KVShard: ...
