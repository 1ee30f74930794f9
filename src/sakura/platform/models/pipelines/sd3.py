"""``StableDiffusion3Pipeline`` folders: the SD3 adapter on the pipeline's VAE, text encoders and
scheduler (see :mod:`.per_step`).

SD3 has no image-conditioning input: the template's reference image becomes the template tokens
the SD3 adapter appends to the image stream (same positions as the user's tokens). The stock
comparison is therefore the plain pipeline on the same prompt embeddings and initial latents
(no reference at all); the masked one is that same call with the template tokens appended by the
adapter's hooks. Both run without classifier-free guidance (``guidance_scale=1``): its negative
branch would need a second KV per step (the pooled prompt modulates the reference tokens).
"""

from __future__ import annotations

from typing import Any

import torch

from sakura.platform.models._attention import Mode, RunState
from sakura.platform.models.base import Template
from sakura.platform.models.pipelines.folder import PipelineFolder
from sakura.platform.models.pipelines.per_step import PerStepPipeline, config_error
from sakura.platform.models.pipelines.settings import check_resolution, settings_error
from sakura.platform.models.pipelines.vae_codec import VaeCodec
from sakura.platform.models.sd3 import SD3Adapter


class SD3PipelineAdapter(PerStepPipeline, SD3Adapter):
    family = "sd3-pipeline"
    pipeline_class = "StableDiffusion3Pipeline"
    default_max_shift = 1.16

    def __init__(self, *, transformer: Any, vae: Any, scheduler: Any, name: str, resolution: int,
                 pipe: Any | None = None, max_sequence_length: int = 256, clip_tokens: int = 77) -> None:
        self._attach(vae=vae, scheduler=scheduler, pipe=pipe, max_sequence_length=max_sequence_length)
        codec = VaeCodec(vae, resolution, packed=False)
        # Prompt tokens: the two CLIPs' (padded to their model_max_length), then T5's.
        super().__init__(transformer, name=name, resolution=resolution, pack=codec.pack,
                         text_tokens=clip_tokens + max_sequence_length, codec=codec)

    def _encode_prompt(self, pipe: Any, prompt: str) -> tuple[torch.Tensor, torch.Tensor]:
        """Both CLIPs' penultimate states beside T5's, and both CLIPs' pooled projections."""
        text, _, pooled, _ = pipe.encode_prompt(prompt=prompt, prompt_2=None, prompt_3=None, device=torch.device("cpu"),
                                                do_classifier_free_guidance=False,
                                                max_sequence_length=self.max_sequence_length)
        return text, pooled

    def _stock_state(self, template: Template) -> RunState:
        latent = self._template_input(template)
        return RunState(mode=Mode.CAPTURE, template_tokens=self._template_token_count(latent), template_latent=latent)

    def _call_stock(self, pipe: Any, template: Template, common: dict[str, Any]) -> Any:
        return pipe(guidance_scale=1.0, **common)


def sd3_adapter(folder: PipelineFolder, components: dict[str, Any], settings: Any) -> SD3PipelineAdapter:
    """The adapter for a folder's components (``pipe`` only when the text encoders are loaded)."""
    transformer, vae = components["transformer"], components["vae"]
    cfg = transformer.config
    if cfg.in_channels != vae.config.latent_channels:
        raise config_error(folder, "transformer", "in_channels", f"{cfg.in_channels}; the VAE makes "
                           f"{vae.config.latent_channels} latent channels")
    scale = 2 ** (len(vae.config.block_out_channels) - 1)
    check_resolution(folder, settings.resolution, scale * cfg.patch_size)
    side = settings.resolution // (scale * cfg.patch_size)
    if cfg.pos_embed_max_size is not None and side > cfg.pos_embed_max_size:
        raise settings_error(folder, "resolution", f"{settings.resolution} makes {side}x{side} patches; the "
                             f"transformer's pos_embed_max_size is {cfg.pos_embed_max_size}")
    pipe = None
    if "text_encoder" in components:  # the cloud
        from diffusers import StableDiffusion3Pipeline

        for name in ("tokenizer", "tokenizer_2"):
            if components[name].model_max_length != settings.clip_max_length:
                raise settings_error(folder, "clip_max_length", f"{settings.clip_max_length}; {name}'s "
                                     f"model_max_length is {components[name].model_max_length}")
        pipe = StableDiffusion3Pipeline(**components)
    return SD3PipelineAdapter(transformer=transformer, vae=vae, scheduler=components["scheduler"], pipe=pipe,
                              name=str(folder.path), resolution=settings.resolution,
                              max_sequence_length=settings.max_sequence_length, clip_tokens=settings.clip_max_length)
