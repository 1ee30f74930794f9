"""Seeded weights for the tiny models tests, the demo and benches build from configs."""

from __future__ import annotations

import torch

__all__ = ["seed_weights"]


def seed_weights(model: torch.nn.Module, seed: int, gain: float = 1.0) -> None:
    """Deterministic weights from our own generator (the global RNG is never touched).

    Matrices get ``gain`` times PyTorch's default ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``;
    biases a small uniform; norm scales 1.
    """
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            if param.ndim >= 2:
                bound = gain * param[0].numel() ** -0.5
                param.copy_(torch.rand(param.shape, generator=g) * 2 * bound - bound)
            elif name.endswith("bias"):
                param.copy_(torch.rand(param.shape, generator=g) * 0.04 - 0.02)
            else:
                param.fill_(1.0)
