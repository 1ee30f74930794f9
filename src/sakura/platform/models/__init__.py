"""Model adapters: capture template KV from a DiT and replay it without the template tokens."""

from sakura.platform.models._attention import AttentionProbe, query_probe
from sakura.platform.models._pixels import PixelCodec
from sakura.platform.models.base import (
    CaptureResult,
    EditRequest,
    ModelAdapter,
    ModelInfo,
    Schedule,
    Template,
    model_fingerprint,
)
from sakura.platform.models.denoising import DenoisingAdapter
from sakura.platform.models.registry import NamedModel, load_model, load_named_model, named_models, register_model

__all__ = [
    "AttentionProbe",
    "CaptureResult",
    "DenoisingAdapter",
    "EditRequest",
    "ModelAdapter",
    "ModelInfo",
    "NamedModel",
    "PixelCodec",
    "Schedule",
    "Template",
    "load_model",
    "load_named_model",
    "model_fingerprint",
    "named_models",
    "query_probe",
    "register_model",
]
