"""A pipeline's VAE as the image codec of the Flux and SD3 adapters, for FLUX.1 Kontext and SD3
pipeline folders, and the few latent helpers the phone needs.

The bare-transformer adapters turn pixels into the transformer's latent grid with a space-to-depth
:class:`~sakura.platform.models._pixels.PixelCodec`; :class:`VaeCodec` has the same interface
(``pack``, ``grid``, ``encode``, ``decode``) and runs the pipeline's own VAE and image processor
instead, so the adapters' attention machinery runs unchanged on real latents.

diffusers keeps the latent bookkeeping as static methods and module functions of
``FluxKontextPipeline`` and ``StableDiffusion3Pipeline``, whose modules import ``transformers``
(the text encoders' classes) at import time. The phone must not load a text encoder's library, so
these few reshapes are reproduced here, each named after the diffusers function it mirrors;
``tests/unit/platform/models/test_kontext_sd3_pipelines.py`` checks each against diffusers' own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from sakura.platform.errors import ImageError


def pack(latents: torch.Tensor) -> torch.Tensor:
    """``FluxKontextPipeline._pack_latents``: (B, C, H, W) -> (B, H/2 * W/2, C * 4), 2x2 patches."""
    batch, channels, height, width = latents.shape
    latents = latents.view(batch, channels, height // 2, 2, width // 2, 2).permute(0, 2, 4, 1, 3, 5)
    return latents.reshape(batch, (height // 2) * (width // 2), channels * 4)


def unpack(latents: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """``FluxKontextPipeline._unpack_latents`` for a latent grid of ``height`` x ``width`` (the
    image's size over the VAE's scale factor): the inverse of :func:`pack`."""
    batch, _, channels = latents.shape
    latents = latents.view(batch, height // 2, width // 2, channels // 4, 2, 2).permute(0, 3, 1, 4, 2, 5)
    return latents.reshape(batch, channels // 4, height, width)


def calculate_shift(image_seq_len: int, config: Mapping[str, Any], default_max_shift: float = 1.15) -> float:
    """``calculate_shift`` with the scheduler config's settings, as both pipelines call it (the
    fallback ``max_shift`` is 1.15 in Kontext's module, 1.16 in SD3's)."""
    base_seq, max_seq = config.get("base_image_seq_len", 256), config.get("max_image_seq_len", 4096)
    base_shift, max_shift = config.get("base_shift", 0.5), config.get("max_shift", default_max_shift)
    m = (max_shift - base_shift) / (max_seq - base_seq)
    b = base_shift - m * base_seq
    return image_seq_len * m + b


class VaeCodec:
    """Images (HxWx3 in [0, 1]) <-> the transformer's latent grid, through the pipeline's VAE.

    ``packed``: FLUX packs 2x2 latent patches into one token (a cell of ``channels * 4``); SD3's
    transformer patchifies by itself, so its grid is the VAE's latent grid. The image goes
    through the pipeline's ``VaeImageProcessor`` both ways and the VAE's distribution mode is the
    latent (``retrieve_latents(..., sample_mode="argmax")``, as Kontext encodes its reference).
    """

    def __init__(self, vae: Any, resolution: int, *, packed: bool) -> None:
        from diffusers.image_processor import VaeImageProcessor

        self.vae, self.resolution, self.packed = vae, resolution, packed
        self.vae_scale = 2 ** (len(vae.config.block_out_channels) - 1)
        self.pack = self.vae_scale * (2 if packed else 1)  # pixels per grid cell, per side
        if resolution % self.pack:
            raise ImageError(f"resolution {resolution} is not a multiple of {self.pack} (the VAE's scale"
                             f"{' times the 2x2 packing' if packed else ''})")
        self.grid = resolution // self.pack
        self.processor = VaeImageProcessor(vae_scale_factor=self.pack)

    def check_size(self, image: np.ndarray) -> np.ndarray:
        if image.shape != (self.resolution, self.resolution, 3):
            raise ImageError(f"the image is {image.shape[1]}x{image.shape[0]}, the model takes "
                             f"{self.resolution}x{self.resolution}")
        return image

    def tensor(self, image: np.ndarray) -> torch.Tensor:
        """The image as SAKURA hands it to the pipeline's processor (and to the stock pipeline's
        ``image``): (1, 3, R, R) in [0, 1], contiguous. Not a numpy array: from one, diffusers'
        processor picks the tensor's memory layout by the array's strides, and the VAE's
        convolutions differ across layouts in the last bits."""
        pixels = torch.from_numpy(np.ascontiguousarray(self.check_size(image), np.float32))
        return pixels.permute(2, 0, 1).unsqueeze(0).contiguous()

    def pixels(self, image: np.ndarray) -> torch.Tensor:
        """What ``FluxKontextPipeline`` makes of that tensor for the VAE (resize, then preprocess):
        (1, 3, R, R) in [-1, 1]."""
        res = self.resolution
        return self.processor.preprocess(self.processor.resize(self.tensor(image), res, res), res, res)

    def encode(self, image: np.ndarray) -> torch.Tensor:
        """HxWx3 in [0, 1] -> (grid, grid, channels) latents, normalised as the pipelines do."""
        cfg = self.vae.config
        with torch.inference_mode():
            latents = self.vae.encode(self.pixels(image).to(self.vae.dtype)).latent_dist.mode()
            latents = (latents - cfg.shift_factor) * cfg.scaling_factor
        if self.packed:
            return pack(latents)[0].reshape(self.grid, self.grid, -1)
        return latents[0].permute(1, 2, 0)

    def decode(self, cells: torch.Tensor) -> np.ndarray:
        """(grid, grid, channels) -> HxWx3 in [0, 1]: the end of the pipelines' ``__call__``."""
        cfg = self.vae.config
        if self.packed:
            size = self.grid * 2
            latents = unpack(cells.reshape(1, self.grid * self.grid, -1), size, size)
        else:
            latents = cells.permute(2, 0, 1)[None]
        with torch.inference_mode():
            latents = latents.to(self.vae.dtype) / cfg.scaling_factor + cfg.shift_factor
            image = self.vae.decode(latents, return_dict=False)[0]
        return self.processor.postprocess(image, output_type="np")[0].astype(np.float32)
