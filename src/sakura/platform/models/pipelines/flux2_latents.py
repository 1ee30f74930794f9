"""FLUX.2's latent bookkeeping for the phone: packing, position ids, the VAE's batch norm, the
timestep shift.

diffusers keeps these as static methods and module functions of ``Flux2KleinKVPipeline``, whose
module imports ``transformers`` (the text encoder's classes) at import time. The phone must not
load a text encoder's library, so these few tensor reshapes are reproduced here, each named after
the diffusers function it mirrors; ``tests/unit/platform/models/test_klein.py`` checks every one
against diffusers' own on the cloud side, and the stock-pipeline parity test checks them end to
end. Nothing here touches attention.
"""

from __future__ import annotations

from typing import Any

import torch


def pack(latents: torch.Tensor) -> torch.Tensor:
    """``_pack_latents``: (B, C, H, W) -> (B, H*W, C)."""
    batch, channels, height, width = latents.shape
    return latents.reshape(batch, channels, height * width).permute(0, 2, 1)


def latent_ids(latents: torch.Tensor) -> torch.Tensor:
    """``_prepare_latent_ids``: (T, H, W, L) coordinates of a (B, C, H, W) latent, T = L = 0."""
    batch, _, height, width = latents.shape
    ids = torch.cartesian_prod(torch.arange(1), torch.arange(height), torch.arange(width), torch.arange(1))
    return ids.unsqueeze(0).expand(batch, -1, -1)


def reference_ids(latents: torch.Tensor) -> torch.Tensor:
    """``_prepare_image_ids`` for one reference image: (T, H, W, L) with T = 10 (its ``scale``)."""
    _, _, height, width = latents.shape
    ids = torch.cartesian_prod(torch.tensor([10]), torch.arange(height), torch.arange(width), torch.arange(1))
    return ids.unsqueeze(0)


def text_ids(embeds: torch.Tensor) -> torch.Tensor:
    """``_prepare_text_ids``: (0, 0, 0, l) for each of the L prompt tokens."""
    batch, length, _ = embeds.shape
    ids = torch.cartesian_prod(torch.arange(1), torch.arange(1), torch.arange(1), torch.arange(length))
    return torch.stack([ids] * batch)


def unpack(latents: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``_unpack_latents_with_ids``: scatter (B, H*W, C) tokens to (B, C, H, W) by their ids."""
    out = []
    for data, pos in zip(latents, ids):
        channels = data.shape[1]
        rows, cols = pos[:, 1].to(torch.int64), pos[:, 2].to(torch.int64)
        height, width = int(rows.max()) + 1, int(cols.max()) + 1
        grid = torch.zeros((height * width, channels), device=data.device, dtype=data.dtype)
        grid.scatter_(0, (rows * width + cols).unsqueeze(1).expand(-1, channels), data)
        out.append(grid.view(height, width, channels).permute(2, 0, 1))
    return torch.stack(out, dim=0)


def patchify(latents: torch.Tensor) -> torch.Tensor:
    """``_patchify_latents``: 2x2 spatial patches into channels."""
    batch, channels, height, width = latents.shape
    latents = latents.view(batch, channels, height // 2, 2, width // 2, 2).permute(0, 1, 3, 5, 2, 4)
    return latents.reshape(batch, channels * 4, height // 2, width // 2)


def unpatchify(latents: torch.Tensor) -> torch.Tensor:
    """``_unpatchify_latents``: the inverse of :func:`patchify`."""
    batch, channels, height, width = latents.shape
    latents = latents.reshape(batch, channels // 4, 2, 2, height, width).permute(0, 1, 4, 2, 5, 3)
    return latents.reshape(batch, channels // 4, height * 2, width * 2)


def batch_norm_stats(vae: Any, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The VAE's latent batch-norm mean and std, shaped to broadcast over (B, C, H, W)."""
    mean = vae.bn.running_mean.view(1, -1, 1, 1).to(like.device, like.dtype)
    std = torch.sqrt(vae.bn.running_var.view(1, -1, 1, 1) + vae.config.batch_norm_eps).to(like.device, like.dtype)
    return mean, std


def encode_image(vae: Any, image: torch.Tensor) -> torch.Tensor:
    """``_encode_vae_image``: an image in [-1, 1] to normalised, patchified latents (the mode)."""
    latents = patchify(vae.encode(image).latent_dist.mode())
    mean, std = batch_norm_stats(vae, latents)
    return (latents - mean) / std


def decode_latents(vae: Any, latents: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """The end of ``Flux2KleinKVPipeline.__call__``: packed latents to the VAE's image in [-1, 1]."""
    grid = unpack(latents, ids)
    mean, std = batch_norm_stats(vae, grid)
    return vae.decode(unpatchify(grid * std + mean), return_dict=False)[0]


def empirical_mu(image_seq_len: int, num_steps: int) -> float:
    """``compute_empirical_mu``: the timestep shift for a sequence length and step count."""
    a1, b1 = 8.73809524e-05, 1.89833333
    a2, b2 = 0.00016927, 0.45666666
    if image_seq_len > 4300:
        return float(a2 * image_seq_len + b2)
    m_200 = a2 * image_seq_len + b2
    m_10 = a1 * image_seq_len + b1
    a = (m_200 - m_10) / 190.0
    return float(a * num_steps + (m_200 - 200.0 * a))
