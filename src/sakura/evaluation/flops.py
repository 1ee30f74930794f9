"""Floating-point operations of one forward pass, counted by torch's ``FlopCounterMode``.

Counting runs on the meta device when the module lives there: a 4B-parameter transformer built
from its config costs no memory and no arithmetic, so the FLOPs of a real architecture come from
the same diffusers/transformers classes that would run it, never from a hand-written formula.
Matrix products, convolutions and attention are counted (torch's counter registers those), which
is where a diffusion model spends its time; norms, activations and element-wise work are left out.
Count on meta: on CPU tensors torch's fused attention kernel has no FLOP formula and counts zero.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode


@dataclass(frozen=True)
class FlopCount:
    """One forward: ``total`` FLOPs, and ``by_module`` (the module's dotted path -> its FLOPs,
    children included; the root module's own class name is the first component)."""

    total: float
    by_module: dict[str, float]

    def under(self, path: str) -> float:
        """FLOPs of the module at ``path`` (relative to the root, e.g. ``transformer_blocks.0``)."""
        for name, flops in self.by_module.items():
            if name.split(".", 1)[-1] == path:
                return flops
        return 0.0


def count_flops(fn: Callable[[], Any]) -> FlopCount:
    """FLOPs of everything ``fn`` runs (typically one module's forward, under ``torch.no_grad``)."""
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        fn()
    by_module = {name: float(sum(ops.values())) for name, ops in counter.get_flop_counts().items()}
    return FlopCount(float(counter.get_total_flops()), by_module)
