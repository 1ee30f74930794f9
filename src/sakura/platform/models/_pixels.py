"""Pixel-space latents for models without a VAE.

An image of ``R x R x 3`` becomes a grid of ``R/pack x R/pack`` cells of ``3 * pack**2`` values
(space-to-depth). When the model wants another channel count, a fixed seeded projection maps
the cells to it (and its pseudo-inverse maps back): a stand-in for a VAE that keeps images
meaningful for the tiny configs and lets any checkpoint be exercised without downloads.
"""

from __future__ import annotations

import numpy as np
import torch

from sakura.platform.errors import ImageError


class PixelCodec:
    def __init__(self, resolution: int, pack: int, channels: int, seed: int = 0) -> None:
        if resolution % pack:
            raise ImageError(f"resolution {resolution} is not a multiple of the pack size {pack}")
        self.resolution, self.pack, self.channels = resolution, pack, channels
        self.grid = resolution // pack
        cell = 3 * pack * pack
        self._proj: torch.Tensor | None = None
        self._inv: torch.Tensor | None = None
        if channels != cell:
            g = torch.Generator().manual_seed(seed)
            proj = torch.randn(cell, channels, generator=g) / cell**0.5
            self._proj, self._inv = proj, torch.linalg.pinv(proj)

    def encode(self, image: np.ndarray) -> torch.Tensor:
        """(..., R, R, 3) floats in [0, 1] -> (..., grid, grid, channels) floats roughly in [-1, 1].

        Leading dimensions (a batch) pass through.
        """
        if image.shape[-3:] != (self.resolution, self.resolution, 3):
            raise ImageError(f"expected {self.resolution}x{self.resolution}x3 images, got {image.shape}")
        x = torch.from_numpy(np.ascontiguousarray(image, dtype=np.float32)) * 2.0 - 1.0
        p, g, lead = self.pack, self.grid, image.shape[:-3]
        n = len(lead)
        x = x.reshape(*lead, g, p, g, p, 3).permute(*range(n), n, n + 2, n + 1, n + 3, n + 4)
        cells = x.reshape(*lead, g, g, 3 * p * p)
        return cells if self._proj is None else cells @ self._proj

    def decode(self, cells: torch.Tensor) -> np.ndarray:
        """(grid, grid, channels) -> HxWx3 floats in [0, 1]."""
        cells = cells.detach().float().cpu()
        if self._inv is not None:
            cells = cells @ self._inv
        p, g = self.pack, self.grid
        x = cells.reshape(g, g, p, p, 3).permute(0, 2, 1, 3, 4).reshape(self.resolution, self.resolution, 3)
        return ((x.clamp(-1.0, 1.0) + 1.0) / 2.0).numpy()
