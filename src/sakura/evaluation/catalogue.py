"""A growing catalogue on the phone: edits whose templates follow a Zipf law, through the phone's
byte-budgeted template cache (:class:`~sakura.platform.caching.Budget`, the eviction policies it
registers by name), with each edit's latency and bytes drawn from simulated edits.

Per system, a pool of simulated edits gives, for a template the phone does not hold (a *miss*),
the latency, the bytes fetched and the bytes the cache then keeps (the shards it fetched: the
client keeps fetched shards, not KV the phone computed); for a template it holds (a *hit*), the
latency with the kept shards read from flash. An edit of a template whose kept shards are a
part of its KV (the hybrid computed the rest) saves that part of the time a miss spends beyond a
full hit, and of its bytes (:func:`hit_latency`): an approximation, said where it is used.

Popularity: rank ``r`` of ``n`` templates is drawn with probability proportional to ``r**-alpha``.
:data:`ZIPF_ALPHA` 0.8: Breslau et al., 'Web Caching and Zipf-like Distributions: Evidence and
Implications' (INFOCOM 1999), whose six proxy traces follow Zipf-like laws with exponents of
0.64-0.83 (as later papers quote it; the primary table was not read here); benches sweep it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sakura.platform.caching import Budget

ZIPF_ALPHA = 0.8


@dataclass(frozen=True)
class PooledEdit:
    """One simulated edit of a system from a phone without the template, and what its cache kept."""

    miss_s: float
    miss_bytes: int
    kept_bytes: int  # the shards it fetched
    kept_fraction: float  # of the template's shards
    full_hit_s: float  # the same edit with every shard on the phone's flash
    objects_bytes: int = 0  # its manifest and the objects bundled with it (prompt embeddings, source)
    warm_s: float = 0.0  # the same edit with those on the phone (its KV not)
    warm_bytes: int = 0

    def cost(self, keep_objects: bool) -> int:
        """What the cache keeps of this edit's template."""
        return self.kept_bytes + (self.objects_bytes if keep_objects else 0)

    def hit(self, kept_fraction: float, keep_objects: bool = False) -> tuple[float, int]:
        """Seconds and bytes of this edit when the cache holds ``kept_fraction`` of the shards (and,
        ``keep_objects``, the manifest and objects: the edit is then warm)."""
        miss_s, miss_bytes = (self.warm_s, self.warm_bytes) if keep_objects else (self.miss_s, self.miss_bytes)
        return hit_latency(miss_s, self.full_hit_s, kept_fraction), round(miss_bytes * (1 - kept_fraction))


def hit_latency(miss_s: float, full_hit_s: float, kept_fraction: float) -> float:
    """A hit's latency when the cache holds ``kept_fraction`` of the template's shards: that part of
    the gap between a miss and a hit of the whole template (the rest is fetched or computed as in
    the miss). An approximation: the parts of an edit do not overlap in proportion."""
    return miss_s - (miss_s - min(miss_s, full_hit_s)) * kept_fraction


@dataclass(frozen=True)
class CatalogueResult:
    edits: int
    hits: int
    latency_s: list[float]
    bytes_fetched: list[int]

    @property
    def hit_ratio(self) -> float:
        return self.hits / self.edits if self.edits else 0.0


def zipf_ranks(n_templates: int, alpha: float, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` template ranks (0 the most popular) drawn from Zipf(``alpha``) over ``n_templates``."""
    weights = np.arange(1, n_templates + 1, dtype=float) ** -alpha
    return rng.choice(n_templates, size=count, p=weights / weights.sum())


def drifting(ranks: np.ndarray, every: int) -> np.ndarray:
    """Template ids of ``ranks`` in a catalogue where a new template takes the top rank every
    ``every`` edits and pushes the others down one (edit ``k``'s rank ``r`` is template
    ``k // every - r``): popularity moves to what is new, as in a catalogue that grows every week."""
    return np.arange(len(ranks)) // every - ranks


def run_catalogue(ranks: Sequence[int] | np.ndarray, pool: Sequence[PooledEdit], budget_bytes: int, eviction: str,
                  rng: np.random.Generator, *, warmup: int = 0, keep_objects: bool = False) -> CatalogueResult:
    """The edits of templates ``ranks`` through a cache of ``budget_bytes`` evicting by
    ``eviction``: each edit's link and start drawn from ``pool``; a template the cache lacks keeps
    the shards its edit fetched (and, ``keep_objects``, its manifest and objects), and a later edit
    of it fetches (or computes) only the rest. The first ``warmup`` edits fill the cache and are
    not counted."""
    cache: Budget[int] = Budget(budget_bytes, eviction)
    kept: dict[int, float] = {}  # template -> the fraction of its shards the cache holds
    draws = rng.integers(len(pool), size=len(ranks))
    hits, latency, fetched = 0, [], []
    for k, (rank, draw) in enumerate(zip(ranks, draws)):
        edit, template = pool[draw], int(rank)
        hit = cache.touch(template)
        seconds, nbytes = edit.hit(kept[template], keep_objects) if hit else (edit.miss_s, edit.miss_bytes)
        if not hit and edit.cost(keep_objects) > 0:
            for victim in cache.admit(template, edit.cost(keep_objects)) or ():
                kept.pop(victim, None)
            if template in cache:
                kept[template] = edit.kept_fraction
        if k >= warmup:
            hits += hit
            latency.append(seconds)
            fetched.append(nbytes)
    return CatalogueResult(len(ranks) - warmup, hits, latency, fetched)
