"""A growing catalogue on the phone: edits whose templates follow a Zipf law, through the phone's
byte-budgeted template cache (:class:`~sakura.platform.caching.Budget`, the eviction policies it
registers by name), with each edit's latency and bytes drawn from simulated edits.

Per system, a pool of simulated edits gives, for a template the phone does not hold (a *miss*),
the latency, the bytes fetched and the bytes the cache then keeps (the shards it fetched: the
client keeps fetched shards, not KV the phone computed); for a template it holds (a *hit*), the
latency with the kept shards read from flash. An edit of a template whose kept shards are a
part of its KV (the hybrid computed the rest) saves that part of the time a miss spends beyond a
full hit (:func:`hit_latency`): an approximation, said where it is used.

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
    """One simulated edit of a system: as a miss, and as a hit of what the miss kept."""

    miss_s: float
    miss_bytes: int
    kept_bytes: int
    hit_s: float


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


def run_catalogue(ranks: Sequence[int], pool: Sequence[PooledEdit], budget_bytes: int, eviction: str,
                  rng: np.random.Generator, *, warmup: int = 0) -> CatalogueResult:
    """The edits of templates ``ranks`` through a cache of ``budget_bytes`` evicting by
    ``eviction``; each edit's figures drawn from ``pool``. The first ``warmup`` edits fill the
    cache and are not counted."""
    cache: Budget[int] = Budget(budget_bytes, eviction)
    draws = rng.integers(len(pool), size=len(ranks))
    hits, latency, fetched = 0, [], []
    for k, (template, draw) in enumerate(zip(ranks, draws)):
        edit = pool[draw]
        hit = cache.touch(int(template))
        if not hit and edit.kept_bytes > 0:
            cache.admit(int(template), edit.kept_bytes)
        if k < warmup:
            continue
        hits += hit
        latency.append(edit.hit_s if hit else edit.miss_s)
        fetched.append(0 if hit else edit.miss_bytes)
    return CatalogueResult(len(ranks) - warmup, hits, latency, fetched)
