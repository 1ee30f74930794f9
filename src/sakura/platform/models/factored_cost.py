"""What attending to a low-rank shard costs the phone, in FLOPs: rebuilding K/V once and attending
densely, or attending to the factors at every use (:mod:`._factored`). Replay picks per shard with
:func:`factored_is_cheaper`; the analytic workloads count the same FLOPs as the phone's work."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AttentionShape:
    """What a FLOP count needs: the calls' batch, heads and queries, the template's tokens, head_dim,
    and how many times replay attends to the shard (every step, for step-independent KV)."""

    batch: int
    heads: int
    queries: int
    tokens: int
    head_dim: int
    uses: int = 1

    @property
    def width(self) -> int:
        return self.heads * self.head_dim


def factored_flops(s: AttentionShape, k_rank: int, v_rank: int) -> float:
    """FLOPs of one call's template part in factored form."""
    calls, rank = s.batch * s.queries, max(k_rank, v_rank)
    project = 2 * calls * s.width * (k_rank + v_rank)  # q B_h^T, and (P C) B_h, every head
    attend = 4 * calls * s.heads * s.tokens * rank  # logits over C, and P C
    return float(project + attend + 4 * calls * s.width)  # the means, and the merge


def dense_flops(s: AttentionShape) -> float:
    """FLOPs of one call's template part with K/V rebuilt: ``q K^T`` and ``P V``."""
    return float(4 * s.batch * s.heads * s.queries * s.tokens * s.head_dim)


def rebuild_flops(s: AttentionShape, k_rank: int, v_rank: int) -> float:
    """FLOPs of rebuilding K and V once (``C B``)."""
    return float(2 * s.tokens * s.width * (k_rank + v_rank))


def factored_is_cheaper(s: AttentionShape, k_rank: int, v_rank: int) -> bool:
    """Whether attending in factored form at every use counts fewer FLOPs than rebuilding once and
    attending densely."""
    return s.uses * factored_flops(s, k_rank, v_rank) < rebuild_flops(s, k_rank, v_rank) + s.uses * dense_flops(s)


def phone_flops(s: AttentionShape, k_rank: int, v_rank: int) -> float:
    """FLOPs a shard in factored form costs the phone beyond a shard of K/V as they are: the rebuild,
    or attending to factors at every use where that counts fewer (then never below nothing)."""
    if factored_is_cheaper(s, k_rank, v_rank):
        return max(0.0, s.uses * (factored_flops(s, k_rank, v_rank) - dense_flops(s)))
    return rebuild_flops(s, k_rank, v_rank)
