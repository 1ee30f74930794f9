"""The version manifest: everything a server or phone needs to find and trust each shard.

A manifest is written last, create-only; a version exists exactly when its manifest does.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError

from sakura.platform.codec.levels import LEVEL_NAME_PATTERN
from sakura.platform.context import CONTEXT_NAME_PATTERN
from sakura.platform.errors import SakuraError
from sakura.platform.ids import TEMPLATE_ID_PATTERN
from sakura.platform.kv import ShardKey
from sakura.platform.layout import MAX_VERSION

SCHEMA_VERSION = 1
MAX_MANIFEST_BYTES = 16 << 20
#: Bounds on what a manifest may list (generous: FLUX.1 per-step at 50 steps has 2,850 shards).
MAX_SHARDS = 1 << 16
MAX_LEVELS = 16
MAX_STEPS = 1000
MAX_RESOLUTION = 8192
_SHA256 = r"^[0-9a-f]{64}$"
_TEXT = 4096  # longest free-text field (prompt, model reference)


class ManifestError(SakuraError, ValueError):
    code = "invalid_manifest"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ShardLocation(_Strict):
    """One shard at one level: a row group of the level file, and the payload's bytes in it."""

    row_group: int = Field(ge=0)
    row_group_offset: int = Field(ge=0)
    row_group_length: int = Field(gt=0)
    offset: int = Field(ge=0)
    length: int = Field(gt=0)
    sha256: str = Field(pattern=_SHA256)


class ShardEntry(_Strict):
    index: int = Field(ge=0)
    step: int | None = Field(default=None, ge=0, lt=MAX_STEPS)
    layer: int = Field(ge=0, lt=MAX_SHARDS)
    shape: tuple[PositiveInt, PositiveInt, PositiveInt]
    #: Share of request attention this shard's template tokens receive (importance-weighted
    #: quality in the level policy); 1.0 when unknown.
    weight: float = Field(default=1.0, ge=0.0, allow_inf_nan=False)
    levels: dict[str, ShardLocation]

    @property
    def key(self) -> ShardKey:
        return ShardKey(self.step, self.layer)


class LevelEntry(_Strict):
    name: str = Field(pattern=LEVEL_NAME_PATTERN)
    #: Root URI of the tier holding this level's file; None: the library's own root (so a
    #: single-root library can be moved or copied whole).
    store: str | None = Field(default=None, max_length=_TEXT)
    key: str = Field(max_length=1024)  # object key of the level file under that root
    bytes: int = Field(ge=0)
    spec: dict


class ContextEntry(_Strict):
    """One context object (:mod:`sakura.platform.context`): a compressed array replay needs."""

    name: str = Field(pattern=CONTEXT_NAME_PATTERN)
    key: str = Field(max_length=1024)
    shape: tuple[PositiveInt, ...] = Field(min_length=1, max_length=4)
    dtype: Literal["float32", "float16"]
    length: int = Field(gt=0)
    sha256: str = Field(pattern=_SHA256)


class ModelRef(_Strict):
    name: str = Field(min_length=1, max_length=_TEXT)
    family: str = Field(max_length=64)
    fingerprint: str = Field(pattern=_SHA256)
    layers: int = Field(gt=0)
    heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    step_dependent: bool


class ScheduleRef(_Strict):
    steps: int = Field(gt=0, le=MAX_STEPS)
    strength: float = Field(gt=0.0, le=1.0)


class TokenLayout(_Strict):
    template: int = Field(ge=0)
    image: int = Field(ge=0)
    text: int = Field(ge=0)


class Manifest(_Strict):
    schema_version: Literal[1] = SCHEMA_VERSION
    template_id: str = Field(pattern=TEMPLATE_ID_PATTERN)
    version: int = Field(ge=1, le=MAX_VERSION)
    task: str = Field(max_length=64)
    prompt: str = Field(max_length=_TEXT)
    resolution: int = Field(gt=0, le=MAX_RESOLUTION)
    content_hash: str = Field(pattern=_SHA256)
    created_at: str = Field(max_length=64)
    model: ModelRef
    schedule: ScheduleRef
    tokens: TokenLayout
    kv_bytes_fp16: int = Field(ge=0)
    importance_key: str | None = Field(default=None, max_length=1024)
    levels: list[LevelEntry] = Field(min_length=1, max_length=MAX_LEVELS)  # smallest first
    shards: list[ShardEntry] = Field(min_length=1, max_length=MAX_SHARDS)  # in the order the model consumes them
    context: list[ContextEntry] = Field(default_factory=list, max_length=MAX_LEVELS)
    #: What the phone needs to compute the template KV itself (``ModelAdapter.template_source``),
    #: stored and served like context objects; names are unique across both lists.
    source: list[ContextEntry] = Field(default_factory=list, max_length=MAX_LEVELS)

    def level(self, name: str) -> LevelEntry:
        for level in self.levels:
            if level.name == name:
                return level
        raise ManifestError(f"{self.template_id} v{self.version} has no level {name!r}")

    def context_object(self, name: str) -> ContextEntry:
        return self._named(self.context, name, "context object")

    def source_object(self, name: str) -> ContextEntry:
        return self._named(self.source, name, "source object")

    def _named(self, entries: list[ContextEntry], name: str, what: str) -> ContextEntry:
        for entry in entries:
            if entry.name == name:
                return entry
        raise ManifestError(f"{self.template_id} v{self.version} has no {what} {name!r}")

    def shard(self, index: int) -> ShardEntry:
        if not 0 <= index < len(self.shards):
            raise ManifestError(f"{self.template_id} v{self.version} has no shard {index}")
        return self.shards[index]

    def to_bytes(self) -> bytes:
        return json.dumps(self.model_dump(mode="json"), indent=1, sort_keys=True).encode()

    def to_wire(self) -> bytes:
        """The compact encoding phones receive (a quarter smaller than the stored, indented one)."""
        return json.dumps(self.model_dump(mode="json"), separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> "Manifest":
        if len(data) > MAX_MANIFEST_BYTES:
            raise ManifestError("manifest is too large")
        try:
            raw = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ManifestError(f"manifest is not JSON: {exc}") from None
        except RecursionError:
            raise ManifestError("manifest JSON is nested too deeply") from None
        if not isinstance(raw, dict) or raw.get("schema_version") != SCHEMA_VERSION:
            raise ManifestError(f"unsupported manifest schema_version {raw.get('schema_version') if isinstance(raw, dict) else None!r}")
        try:
            manifest = cls.model_validate(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise ManifestError(f"invalid manifest: {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
        names = [level.name for level in manifest.levels]
        objects = [entry.name for entry in [*manifest.context, *manifest.source]]
        if len(set(names)) != len(names) or len(set(objects)) != len(objects):
            raise ManifestError("invalid manifest: a level, context or source object is listed twice")
        if any(set(s.levels) != set(names) for s in manifest.shards):
            raise ManifestError("invalid manifest: a shard lacks a level")
        if [s.index for s in manifest.shards] != list(range(len(manifest.shards))):
            raise ManifestError("invalid manifest: shard indexes are not 0..n-1")
        return manifest


class AliasDoc(_Strict):
    version: int = Field(ge=1)

    def to_bytes(self) -> bytes:
        return json.dumps({"version": self.version}).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> "AliasDoc":
        try:
            return cls.model_validate_json(data)
        except ValidationError as exc:
            raise ManifestError(f"invalid alias document: {exc.errors()[0]['msg']}") from None
