"""A pipeline folder's SAKURA settings.

A folder may carry a ``sakura.json`` next to its ``model_index.json`` with the settings a
pipeline's ``__call__`` would otherwise take per call and that SAKURA fixes per library: the
resolution templates and edits run at, the prompt length, the text encoder's output layers
(klein), the embedded guidance (Kontext), the CLIP tokenizers' length (SD3).
"""

from __future__ import annotations

import os
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sakura.platform.models.pipelines.folder import PipelineError, PipelineFolder, read_json

__all__ = ["SETTINGS", "KleinSettings", "KontextSettings", "SD3Settings", "check_resolution", "read_settings",
           "settings_error"]

SETTINGS = "sakura.json"


class KleinSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    resolution: int = Field(default=512, ge=16, le=2048)
    max_sequence_length: int = Field(default=512, ge=1, le=512)
    #: Indexes into the text encoder's hidden states (Python's: negative from the last), so bounded.
    text_encoder_out_layers: tuple[Annotated[int, Field(ge=-1024, le=1024)], ...] = Field(
        default=(9, 18, 27), min_length=1, max_length=8)


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
    """The folder's settings, the defaults without a ``sakura.json``; anything else there that is
    not such a file (a FIFO, a link to nothing, bad JSON) is a :class:`PipelineError`."""
    path = folder.path / SETTINGS
    if not os.path.lexists(path):
        return model()
    try:
        return model.model_validate(read_json(path))
    except FileNotFoundError:
        raise PipelineError(f"{path}: a link to a file that is not there") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        raise PipelineError(f"{path}: field '{'.'.join(map(str, err['loc']))}': {err['msg']}") from None


def settings_error(folder: PipelineFolder, field: str, message: str) -> PipelineError:
    return PipelineError(f"{folder.path / SETTINGS}: field {field!r}: {message}")


def check_resolution(folder: PipelineFolder, resolution: int, multiple: int) -> None:
    if resolution % multiple:
        raise settings_error(folder, "resolution", f"{resolution} is not a multiple of {multiple} (the VAE's scale "
                                                   "times the transformer's patch)")
