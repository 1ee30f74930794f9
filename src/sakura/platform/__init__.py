"""SAKURA's shared core: KV containers, model adapters, template specs. Never imports ray."""

from sakura.platform.errors import (
    ImageError,
    InvalidTemplateId,
    ModelError,
    SakuraError,
    SpecError,
    UnknownModel,
)
from sakura.platform.ids import TEMPLATE_ID_PATTERN, validate_template_id
from sakura.platform.kv import KVGeometry, KVPair, ShardKey, TemplateKV

__all__ = [
    "TEMPLATE_ID_PATTERN",
    "ImageError",
    "InvalidTemplateId",
    "KVGeometry",
    "KVPair",
    "ModelError",
    "SakuraError",
    "ShardKey",
    "SpecError",
    "TemplateKV",
    "UnknownModel",
    "validate_template_id",
]
