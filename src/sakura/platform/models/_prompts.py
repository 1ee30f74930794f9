"""Deterministic prompt embeddings for models that ship without a text encoder.

Each word maps to a vector drawn from a generator seeded by the word's hash, so the same prompt
always gives the same embedding and prompts that share words share token vectors.
"""

from __future__ import annotations

import hashlib
import re

import torch

_WORD = re.compile(r"\w+")


class HashedPromptEncoder:
    def __init__(self, tokens: int, dim: int, pooled_dim: int) -> None:
        self.tokens, self.dim, self.pooled_dim = tokens, dim, pooled_dim

    def encode(self, prompt: str) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(text (1, tokens, dim), pooled (1, pooled_dim))``."""
        words = _WORD.findall(prompt.lower())[: self.tokens]
        text = torch.zeros(1, self.tokens, self.dim)
        pooled = torch.zeros(1, self.pooled_dim)
        for i, word in enumerate(words):
            g = torch.Generator().manual_seed(_seed(word))
            text[0, i] = torch.randn(self.dim, generator=g)
            pooled[0] += torch.randn(self.pooled_dim, generator=g)
        if words:
            pooled /= len(words) ** 0.5
        return text, pooled


def _seed(word: str) -> int:
    return int.from_bytes(hashlib.sha256(b"sakura-prompt:" + word.encode()).digest()[:8], "little") & (2**63 - 1)
