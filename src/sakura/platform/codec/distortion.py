"""Attention-output error: how much a coded shard moves what the model computes with it.

The level target of a transform level is a relative attention-output error, measured here on a
sample of queries: the request queries a calibration edit put to the shard (a
:class:`QueryProbe` made by the model adapter), or, where a model exposes none (a pipeline's own
KV seam), the template's own keys standing in for queries (:func:`surrogate_probe`, an estimate:
template and request tokens share the projection and normalisation that make queries and keys).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

#: Queries sampled per shard (an estimate: enough for a stable mean error, cheap at every rung).
MAX_QUERIES = 256


@dataclass(frozen=True)
class QueryProbe:
    """Queries ``(heads, m, head_dim)`` put to one shard's template K/V and, where they attend to
    request tokens too, that part of their attention: its log-sum-exp ``(heads, m)`` and output
    ``(heads, m, head_dim)``, so the whole attention is recovered without the request's keys."""

    queries: np.ndarray
    request_lse: np.ndarray | None = None
    request_out: np.ndarray | None = None

    def output(self, k: np.ndarray, v: np.ndarray) -> np.ndarray:
        """The queries' attention output with template keys ``k`` and values ``v`` (heads, tokens, head_dim)."""
        return self.combine(self.scores(k), v)

    def scores(self, k: np.ndarray) -> Scores:
        """The queries' softmax against keys ``k``, before normalising: what every output with those keys shares."""
        q = self.queries.astype(np.float32, copy=False)
        logits = q @ np.swapaxes(k.astype(np.float32, copy=False), 1, 2) * np.float32(1.0 / math.sqrt(q.shape[-1]))
        top = logits.max(axis=-1, keepdims=True)
        weights = np.exp(logits - top)
        return Scores(top, weights, weights.sum(axis=-1, keepdims=True))

    def combine(self, scores: Scores, v: np.ndarray) -> np.ndarray:
        """The attention output of ``scores`` with values ``v``, merged with the request's part where there is one."""
        top, weights, total = scores
        out = (weights @ v.astype(np.float32, copy=False)) / total
        if self.request_lse is None or self.request_out is None:
            return out
        lse = (top + np.log(total))[..., 0]
        both = np.logaddexp(lse, self.request_lse)
        return (np.exp(lse - both)[..., None] * out + np.exp(self.request_lse - both)[..., None] * self.request_out)

    def squared_error(self, exact: np.ndarray, k: np.ndarray, v: np.ndarray) -> float:
        """``|O(k, v) - exact|^2 / |exact|^2``: the squared relative error against the exact output."""
        return _relative(self.output(k, v), exact, _energy(exact))


class Scores(NamedTuple):
    """Softmax numerators of a probe's queries against one set of keys: their row maxima, the
    exponentials below them and their row sums (heads, m, ...)."""

    top: np.ndarray
    weights: np.ndarray
    total: np.ndarray


class OutputError:
    """The squared relative output error (:meth:`QueryProbe.squared_error`) that a coded K or a
    coded V alone causes on one shard. The exact keys' softmax is computed once, so a coded V
    costs one weighted sum, not a whole attention."""

    def __init__(self, probe: QueryProbe, k: np.ndarray, v: np.ndarray) -> None:
        self._probe, self._v = probe, v
        self._exact_scores = probe.scores(k)
        self.exact = probe.combine(self._exact_scores, v)
        self._energy = _energy(self.exact)

    def of_keys(self, k: np.ndarray) -> float:
        """The error with keys ``k`` and the exact values."""
        return _relative(self._probe.output(k, self._v), self.exact, self._energy)

    def of_values(self, v: np.ndarray) -> float:
        """The error with the exact keys and values ``v``."""
        return _relative(self._probe.combine(self._exact_scores, v), self.exact, self._energy)


def _energy(exact: np.ndarray) -> float:
    return max(float((exact.astype(np.float64) ** 2).sum()), 1e-300)


def _relative(output: np.ndarray, exact: np.ndarray, energy: float) -> float:
    diff = output.astype(np.float64) - exact
    return float((diff**2).sum() / energy)


def surrogate_probe(k: np.ndarray, max_queries: int = MAX_QUERIES) -> QueryProbe:
    """The template's own keys (up to ``max_queries`` tokens, evenly spread) standing in for queries."""
    return QueryProbe(np.ascontiguousarray(k[:, _spread(k.shape[1], max_queries)], dtype=np.float32))


def _spread(n: int, m: int) -> np.ndarray:
    """``min(n, m)`` indices evenly spread over ``range(n)``."""
    return np.unique(np.linspace(0, n - 1, min(n, m)).round().astype(np.int64))
