"""What the diffusers-family adapters (Flux, SD3) share: pixel latents, hashed prompts, model info."""

from __future__ import annotations

import abc
from typing import Any, Protocol

import numpy as np
import torch

from sakura.platform.models._pixels import PixelCodec
from sakura.platform.models._prompts import HashedPromptEncoder
from sakura.platform.models.base import EditRequest, ModelInfo
from sakura.platform.models.denoising import DenoisingAdapter


class LatentCodec(Protocol):
    """Images (HxWx3 in [0, 1]) <-> the transformer's (grid, grid, channels) latent cells."""

    pack: int
    grid: int

    def encode(self, image: np.ndarray) -> torch.Tensor: ...

    def decode(self, cells: torch.Tensor) -> np.ndarray: ...


class DiffusersAdapter(DenoisingAdapter):
    """A diffusers transformer without its text encoder or VAE (see ``_prompts`` and ``_pixels``).

    ``codec`` replaces the pixel codec (a pipeline folder's VAE: ``pipelines.vae_codec``)."""

    step_dependent = True
    #: A diffusers transformer: its config and blocks are attributes torch types as ``Tensor | Module``.
    model: Any

    def __init__(self, model: torch.nn.Module, *, name: str, resolution: int, pack: int, text_tokens: int,
                 codec: LatentCodec | None = None) -> None:
        cfg: Any = model.config  # diffusers' FrozenDict, read by attribute
        self.codec = codec if codec is not None else PixelCodec(resolution, pack, cfg.in_channels)
        self.prompts = HashedPromptEncoder(text_tokens, cfg.joint_attention_dim, cfg.pooled_projection_dim)
        self.text_tokens = text_tokens
        super().__init__(model, name=name, resolution=resolution)

    @abc.abstractmethod
    def _attention_modules(self) -> list[Any]:
        """The attention modules in the order the model runs them (layer indexes follow it): diffusers
        modules whose processors are set by duck typing (``set_processor``)."""

    @abc.abstractmethod
    def _image_tokens(self) -> int: ...

    @abc.abstractmethod
    def _template_forward(self, template: torch.Tensor, sigma: float, cond: Any) -> None:
        """The template's tokens alone through the model at noise level ``sigma`` (in the run
        state's capture mode, which records their K/V)."""

    @abc.abstractmethod
    def _template_latent_shape(self) -> tuple[int, ...]:
        """The shape of the template's latent as the model takes it (no batch axis)."""

    def _fingerprint_extra(self) -> dict[str, Any]:
        return {**super()._fingerprint_extra(), "pack": self.codec.pack, "text_tokens": self.text_tokens}

    def info(self) -> ModelInfo:
        cfg = self.model.config
        return ModelInfo(
            name=self.name,
            family=self.family,
            layers=len(self._attention_modules()),
            heads=cfg.num_attention_heads,
            head_dim=cfg.attention_head_dim,
            resolution=self.resolution,
            image_tokens=self._image_tokens(),
            text_tokens=self.text_tokens,
            step_dependent=self.step_dependent,
        )

    def _condition(self, prompt: str, request: EditRequest) -> tuple[torch.Tensor, torch.Tensor]:
        text, pooled = self.prompts.encode(prompt)
        return text.to(self._dtype), pooled.to(self._dtype)

    @property
    def _dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype
