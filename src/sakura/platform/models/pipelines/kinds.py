"""What makes the adapter of each pipeline class SAKURA runs, from a folder's loaded components
(named by :data:`~sakura.platform.models.pipelines.folder.PIPELINE_KINDS`, imported only when a
folder of that class is loaded)."""

from __future__ import annotations

from typing import Any

import torch

from sakura.platform.models.pipelines.folder import PipelineFolder
from sakura.platform.models.pipelines.settings import (
    KleinSettings,
    KontextSettings,
    SD3Settings,
    check_resolution,
    read_settings,
)

__all__ = ["load_klein", "load_kontext", "load_sd3"]

def load_klein(folder: PipelineFolder, components: dict[str, Any], dtype: torch.dtype) -> Any:
    from sakura.platform.models.pipelines.klein import KleinAdapter

    settings = read_settings(folder, KleinSettings)
    check_resolution(folder, settings.resolution, 2 ** len(components["vae"].config.block_out_channels))
    pipe = None
    if "text_encoder" in components:  # the cloud: the stock pipeline, text encoder included
        from diffusers import Flux2KleinKVPipeline

        pipe = Flux2KleinKVPipeline(**components, **{k: v for k, v in folder.extra.items() if k == "is_distilled"})
    return KleinAdapter(transformer=components["transformer"], vae=components["vae"], scheduler=components["scheduler"],
                        pipe=pipe, name=str(folder.path), resolution=settings.resolution,
                        max_sequence_length=settings.max_sequence_length,
                        text_encoder_out_layers=settings.text_encoder_out_layers)


def load_kontext(folder: PipelineFolder, components: dict[str, Any], dtype: torch.dtype) -> Any:
    from sakura.platform.models.pipelines.kontext import kontext_adapter

    return kontext_adapter(folder, components, read_settings(folder, KontextSettings))


def load_sd3(folder: PipelineFolder, components: dict[str, Any], dtype: torch.dtype) -> Any:
    from sakura.platform.models.pipelines.sd3 import sd3_adapter

    return sd3_adapter(folder, components, read_settings(folder, SD3Settings))
