"""Attention over template K/V held as low-rank factors (wire format v2), without rebuilding them.

A tensor ``X = C B + 1 m^T`` over the heads' joint width has, for head ``h`` (``B_h``, ``m_h``: that
head's slice of the basis and mean):

* keys: ``q K_h^T = (q B_h^T) C^T + (q . m_h)``: the template's keys are ``C`` itself, shared by every
  head, for queries ``q B_h^T`` of the rank's width; ``q . m_h`` is the same for every template token,
  so it shifts the template part's log-sum-exp and nothing else;
* values: softmax rows sum to 1, so ``P V_h = (P C) B_h + m_h``.

So the template part is one attention of width ``rank`` (values padded to the keys' width), and the
request part is the usual one; the two merge by their log-sum-exps. Both run in torch's fused CPU
attention kernel, which returns the log-sum-exp; elsewhere a plain softmax does the same
arithmetic. A shard is attended to in this form or rebuilt once, whichever counts fewer FLOPs over
the uses replay makes of it (:mod:`~sakura.platform.models.factored_cost`); either way the output equals rebuilding
and attending up to float rounding (the tests assert it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from sakura.platform.kv import FactoredPair, KVShard
from sakura.platform.models.factored_cost import AttentionShape, factored_is_cheaper

#: torch's fused CPU attention kernel that also returns the log-sum-exp (absent: a plain softmax).
FUSED_LSE = hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu")


@dataclass(frozen=True)
class ShardFactors:
    """A shard's template K/V as torch factors, the bases and means split by head."""

    k_coefficients: torch.Tensor  # (tokens, width): keys for every head; width = max(k rank, v rank)
    k_basis: torch.Tensor  # (heads, head_dim, width): q @ k_basis[h] is head h's query in that space
    k_mean: torch.Tensor  # (heads, head_dim)
    v_coefficients: torch.Tensor  # (tokens, width), zero-padded past the v rank
    v_basis: torch.Tensor  # (heads, width, head_dim), zero rows past the v rank
    v_mean: torch.Tensor  # (heads, head_dim)


#: A shard's template K and V as attention takes them: (1, heads, tokens, head_dim) each, or factors.
TemplateTensors = tuple[torch.Tensor, torch.Tensor] | ShardFactors


def template_tensors(shard: KVShard, like: torch.Tensor, queries: int, uses: int) -> TemplateTensors:
    """A shard's K and V as this call's attention takes them: dense, or (a :class:`FactoredPair` whose
    K and V both have a stored basis, where that counts fewer FLOPs) factors."""
    if isinstance(shard, FactoredPair):
        k, v = shard.k_factors, shard.v_factors
        heads, tokens, head_dim = shard.shape
        s = AttentionShape(like.shape[0], heads, queries, tokens, head_dim, uses)
        if k.basis is not None and v.basis is not None and factored_is_cheaper(s, k.rank, v.rank):
            rank = max(k.rank, v.rank)
            k_basis = np.zeros((rank, heads * head_dim), np.float32)
            k_basis[: k.rank] = k.basis
            v_basis = np.zeros((rank, heads * head_dim), np.float32)
            v_basis[: v.rank] = v.basis
            return ShardFactors(
                _torch(_pad(k.coefficients, rank), like),
                _torch(k_basis.reshape(rank, heads, head_dim).transpose(1, 2, 0), like),
                _torch(k.mean.reshape(heads, head_dim), like),
                _torch(_pad(v.coefficients, rank), like),
                _torch(v_basis.reshape(rank, heads, head_dim).transpose(1, 0, 2), like),
                _torch(v.mean.reshape(heads, head_dim), like))
        shard = shard.dense()
    return _torch(shard.k, like).unsqueeze(0), _torch(shard.v, like).unsqueeze(0)


def _pad(x: np.ndarray, width: int) -> np.ndarray:
    out = np.zeros((x.shape[0], width), np.float32)
    out[:, : x.shape[1]] = x
    return out


def _torch(x: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x)).to(device=like.device, dtype=like.dtype)


def attend(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, f: ShardFactors) -> torch.Tensor:
    """Attention of ``query`` over the request's ``key``/``value`` and a factored template, all
    ``(batch, heads, seq, head_dim)``; the template's place in the sequence does not matter to it."""
    scale = query.shape[-1] ** -0.5
    batch, heads = query.shape[:2]
    tokens, rank = f.k_coefficients.shape
    projected = query @ f.k_basis  # (batch, heads, queries, rank)
    keys = f.k_coefficients.expand(batch, heads, tokens, rank)
    values = f.v_coefficients.expand(batch, heads, tokens, rank)
    out_request, lse_request = _attention(query, key, value, scale)
    out_template, lse_template = _attention(projected, keys, values, scale)
    lse_template = lse_template + (query * f.k_mean[:, None, :]).sum(dim=-1) * scale
    out_template = out_template @ f.v_basis + f.v_mean[:, None, :]
    both = torch.logaddexp(lse_request, lse_template)
    return (torch.exp(lse_request - both)[..., None] * out_request
            + torch.exp(lse_template - both)[..., None] * out_template).to(query.dtype)


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention and its log-sum-exp per query: torch's fused CPU kernel where it applies."""
    if FUSED_LSE and q.device.type == "cpu":
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q.contiguous(), k.contiguous(), v.contiguous(), scale=scale)
        return out, lse.float()
    logits = (q @ k.transpose(-1, -2)).float() * scale
    lse = torch.logsumexp(logits, dim=-1)
    return (torch.exp(logits - lse[..., None]).to(v.dtype) @ v), lse


__all__ = ["ShardFactors", "TemplateTensors", "attend", "template_tensors"]
