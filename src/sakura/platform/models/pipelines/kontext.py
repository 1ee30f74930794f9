"""``FluxKontextPipeline`` folders: the Flux adapter on the pipeline's VAE, text encoders and
scheduler (see :mod:`.per_step`).

Kontext's reference image is its ``image`` input: the pipeline appends its packed latents after
the user's tokens with position ids whose first axis is 1, exactly where the Flux adapter puts
template tokens, so SAKURA's masking runs inside the stock ``__call__`` unchanged.
"""

from __future__ import annotations

from typing import Any

import torch

from sakura.platform.models._attention import Mode, RunState
from sakura.platform.models.base import Template, to_unit_image
from sakura.platform.models.flux import FluxAdapter
from sakura.platform.models.pipelines.folder import PipelineFolder
from sakura.platform.models.pipelines.per_step import PerStepPipeline, config_error
from sakura.platform.models.pipelines.settings import check_resolution
from sakura.platform.models.pipelines.vae_codec import VaeCodec


class KontextAdapter(PerStepPipeline, FluxAdapter):
    family = "flux-kontext"
    pipeline_class = "FluxKontextPipeline"
    codec: VaeCodec

    def __init__(self, *, transformer: Any, vae: Any, scheduler: Any, name: str, resolution: int,
                 pipe: Any | None = None, max_sequence_length: int = 512, guidance_scale: float = 3.5) -> None:
        self._attach(vae=vae, scheduler=scheduler, pipe=pipe, max_sequence_length=max_sequence_length)
        self.guidance_scale = guidance_scale
        codec = VaeCodec(vae, resolution, packed=True)
        super().__init__(transformer, name=name, resolution=resolution, pack=codec.pack,
                         text_tokens=max_sequence_length, codec=codec)

    def _fingerprint_extra(self) -> dict[str, Any]:
        return {**super()._fingerprint_extra(), "guidance_scale": self.guidance_scale}

    def _encode_prompt(self, pipe: Any, prompt: str) -> tuple[torch.Tensor, torch.Tensor]:
        """T5's token embeddings and CLIP's pooled one."""
        text, pooled, _ = pipe.encode_prompt(prompt=prompt, prompt_2=None, device=torch.device("cpu"),
                                             max_sequence_length=self.max_sequence_length)
        return text, pooled

    def _stock_state(self, template: Template) -> RunState:
        return RunState(mode=Mode.CAPTURE, template_tokens=self.codec.grid**2)

    def _call_stock(self, pipe: Any, template: Template, common: dict[str, Any]) -> Any:
        """The reference image as ``image`` at the edit's size (no resizing to Kontext's preferred
        resolutions), embedded guidance as configured."""
        res = self.resolution
        return pipe(image=self.codec.tensor(to_unit_image(template.image)), max_area=res * res, _auto_resize=False,
                    guidance_scale=self.guidance_scale, **common)


def kontext_adapter(folder: PipelineFolder, components: dict[str, Any], settings: Any) -> KontextAdapter:
    """The adapter for a folder's components (``pipe`` only when the text encoders are loaded)."""
    transformer, vae = components["transformer"], components["vae"]
    packed = vae.config.latent_channels * 4
    if transformer.config.in_channels != packed:
        raise config_error(folder, "transformer", "in_channels", f"{transformer.config.in_channels}; the VAE's "
                           f"{vae.config.latent_channels} latent channels packed 2x2 make {packed}")
    check_resolution(folder, settings.resolution, 2 ** len(vae.config.block_out_channels))
    pipe = None
    if "text_encoder" in components:  # the cloud
        from diffusers import FluxKontextPipeline

        pipe = FluxKontextPipeline(**components)
    return KontextAdapter(transformer=transformer, vae=vae, scheduler=components["scheduler"], pipe=pipe,
                          name=str(folder.path), resolution=settings.resolution,
                          max_sequence_length=settings.max_sequence_length, guidance_scale=settings.guidance_scale)
