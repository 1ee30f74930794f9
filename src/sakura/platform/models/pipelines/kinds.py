"""The pipeline classes SAKURA runs, registered with :mod:`.folder`.

A folder may carry a ``sakura.json`` next to its ``model_index.json`` with the settings a
pipeline's ``__call__`` would otherwise take per call and that SAKURA fixes per library: the
resolution templates and edits run at, the prompt length, the text encoder's output layers
(klein), the embedded guidance (Kontext), the CLIP tokenizers' length (SD3).
"""

from __future__ import annotations

import json
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sakura.platform.models.pipelines.folder import PipelineError, PipelineFolder, PipelineKind, register_pipeline

SETTINGS = "sakura.json"


class KleinSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    resolution: int = Field(default=512, ge=16, le=2048)
    max_sequence_length: int = Field(default=512, ge=1, le=512)
    text_encoder_out_layers: tuple[int, ...] = Field(default=(9, 18, 27), min_length=1, max_length=8)


class KontextSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    resolution: int = Field(default=1024, ge=16, le=2048)
    max_sequence_length: int = Field(default=512, ge=1, le=512)  # T5 tokens
    guidance_scale: float = Field(default=3.5, ge=0.0, le=100.0)  # embedded guidance (no true CFG)


class SD3Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    resolution: int = Field(default=1024, ge=16, le=2048)
    max_sequence_length: int = Field(default=256, ge=1, le=512)  # T5 tokens
    clip_max_length: int = Field(default=77, ge=1, le=77)  # the CLIP tokenizers' model_max_length


def read_settings(folder: PipelineFolder, model: type[BaseModel]) -> Any:
    path = folder.path / SETTINGS
    if not path.is_file():
        return model()
    try:
        return model.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PipelineError(f"{path}: unreadable: {exc}") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        raise PipelineError(f"{path}: field '{'.'.join(map(str, err['loc']))}': {err['msg']}") from None


def settings_error(folder: PipelineFolder, field: str, message: str) -> PipelineError:
    return PipelineError(f"{folder.path / SETTINGS}: field {field!r}: {message}")


def check_resolution(folder: PipelineFolder, resolution: int, multiple: int) -> None:
    if resolution % multiple:
        raise settings_error(folder, "resolution", f"{resolution} is not a multiple of {multiple} (the VAE's scale "
                                                   "times the transformer's patch)")


def _load_klein(folder: PipelineFolder, components: dict[str, Any], dtype: torch.dtype) -> Any:
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


register_pipeline(PipelineKind("Flux2KleinKVPipeline", phone=("scheduler", "vae", "transformer"),
                               cloud=("text_encoder", "tokenizer"), load=_load_klein))


def _load_kontext(folder: PipelineFolder, components: dict[str, Any], dtype: torch.dtype) -> Any:
    from sakura.platform.models.pipelines.kontext import load_kontext

    return load_kontext(folder, components, read_settings(folder, KontextSettings))


def _load_sd3(folder: PipelineFolder, components: dict[str, Any], dtype: torch.dtype) -> Any:
    from sakura.platform.models.pipelines.sd3_pipeline import load_sd3

    return load_sd3(folder, components, read_settings(folder, SD3Settings))


_PER_STEP_PHONE = ("scheduler", "vae", "transformer")
register_pipeline(PipelineKind("FluxKontextPipeline", phone=_PER_STEP_PHONE,
                               cloud=("text_encoder", "tokenizer", "text_encoder_2", "tokenizer_2"),
                               load=_load_kontext))
register_pipeline(PipelineKind("StableDiffusion3Pipeline", phone=_PER_STEP_PHONE,
                               cloud=("text_encoder", "tokenizer", "text_encoder_2", "tokenizer_2", "text_encoder_3",
                                      "tokenizer_3"), load=_load_sd3))
