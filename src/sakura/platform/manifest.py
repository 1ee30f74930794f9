"""The version manifest: everything a server or phone needs to find and trust each shard.

Two views of one document. :class:`Manifest` is what the library stores (written last,
create-only; a version exists exactly when its manifest does): where every level file lives and
where each shard sits in it. :class:`PhoneManifest` is what a phone receives: what each shard is
and how to check it (its length and sha256), none of the server's internals (store URIs, object
keys, row groups, importance keys). Phones read it tolerantly, so a server can add fields: unknown
fields are ignored and only a higher major ``schema_version`` is refused. The stored view is read
strictly: the cloud side writes it and must never lose a field it does not understand.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING, Any, Final, Literal

import zstandard
from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError

from sakura.platform.codec.format import FORMAT_VERSIONS
from sakura.platform.codec.levels import LEVEL_NAME_PATTERN
from sakura.platform.context import CONTEXT_NAME_PATTERN
from sakura.platform.errors import SakuraError
from sakura.platform.ids import TEMPLATE_ID_PATTERN
from sakura.platform.kv import ShardKey
from sakura.platform.layout import MAX_VERSION

SCHEMA_VERSION: Final = 1
#: The phone-facing view's schema, ``major.minor``: a minor bump only adds fields.
#: 1.1: ``images``; 1.2: ``shard_hashes``; 1.3: a level's ``format``, a context object's ``encoding``.
PHONE_SCHEMA_VERSION = "1.3"
#: Bytes of one shard's digest at one level in the shard hashes object (:class:`PhoneHashes`).
DIGEST_BYTES = 32
MAX_MANIFEST_BYTES = 16 << 20
#: Bounds on what a manifest may list (generous: FLUX.1 per-step at 50 steps has 2,850 shards).
MAX_SHARDS = 1 << 16
MAX_LEVELS = 16
MAX_STEPS = 1000
MAX_RESOLUTION = 8192
_SHA256 = r"^[0-9a-f]{64}$"
_TEXT = 4096  # longest free-text field (prompt, model reference)
_PHONE_MAJOR = int(PHONE_SCHEMA_VERSION.split(".")[0])
_SCHEMA = re.compile(r"^([0-9]{1,4})(?:\.[0-9]{1,4})?$")
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


class ManifestError(SakuraError, ValueError):
    code = "invalid_manifest"


class _Tolerant(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


_STRICT = ConfigDict(extra="forbid", frozen=True)


# -- what a phone sees ---------------------------------------------------------------------
class ShardPayload(_Tolerant):
    """One shard at one level, as a phone checks it. ``sha256`` is None in a manifest sent without
    its shards' hashes (:class:`PhoneHashes`)."""

    length: int = Field(gt=0)
    sha256: str | None = Field(default=None, pattern=_SHA256)


class PhoneShard(_Tolerant):
    index: int = Field(ge=0)
    step: int | None = Field(default=None, ge=0, lt=MAX_STEPS)
    layer: int = Field(ge=0, lt=MAX_SHARDS)
    shape: tuple[PositiveInt, PositiveInt, PositiveInt]
    #: Share of request attention this shard's template tokens receive (importance-weighted
    #: quality in the level policy); 1.0 when unknown.
    weight: float = Field(default=1.0, ge=0.0, allow_inf_nan=False)
    levels: dict[str, ShardPayload]

    @property
    def key(self) -> ShardKey:
        return ShardKey(self.step, self.layer)


class PhoneLevel(_Tolerant):
    name: str = Field(pattern=LEVEL_NAME_PATTERN)
    bytes: int = Field(ge=0)
    spec: dict
    #: The shard wire format version of this level's payloads (1 before schema 1.3): a phone
    #: whose decoder lacks it leaves the level out (:meth:`PhoneManifest.readable_levels`).
    format: int = Field(default=1, ge=1, le=255)


class PhoneObject(_Tolerant):
    """One context or source object (:mod:`sakura.platform.context`): a compressed array replay needs."""

    name: str = Field(pattern=CONTEXT_NAME_PATTERN)
    shape: tuple[PositiveInt, ...] = Field(min_length=1, max_length=4)
    dtype: Literal["float32", "float16"]
    length: int = Field(gt=0)
    sha256: str = Field(pattern=_SHA256)
    #: How its bytes encode the array (:mod:`sakura.platform.context`; before schema 1.3: zstd).
    encoding: Literal["zstd", "lowrank"] = "zstd"


class PhoneImage(_Tolerant):
    """The template's published image (:mod:`sakura.platform.template_image`): what a phone's own
    image codec makes the source objects from (``ModelAdapter.source_from_image``), served and
    checked like a source object."""

    name: str = Field(pattern=CONTEXT_NAME_PATTERN)
    format: Literal["jpeg"]
    width: int = Field(gt=0, le=MAX_RESOLUTION)
    height: int = Field(gt=0, le=MAX_RESOLUTION)
    length: int = Field(gt=0)
    sha256: str = Field(pattern=_SHA256)


class PhoneHashes(_Tolerant):
    """Every shard's sha256 at every level as one object (``http_api.HASHES``): ``DIGEST_BYTES`` each,
    shard by shard, levels in the manifest's order. A phone that may compute every block itself asks
    for the manifest without its shards' hashes (most of a per-step model's manifest: they do not
    compress) and fetches this only once it fetches a shard; checked by its own sha256 and length."""

    length: int = Field(gt=0, le=MAX_SHARDS * MAX_LEVELS * DIGEST_BYTES)
    sha256: str = Field(pattern=_SHA256)


class PhoneModel(_Tolerant):
    name: str = Field(min_length=1, max_length=_TEXT)
    family: str = Field(max_length=64)
    fingerprint: str = Field(pattern=_SHA256)
    layers: int = Field(gt=0)
    heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    step_dependent: bool


class PhoneSchedule(_Tolerant):
    steps: int = Field(gt=0, le=MAX_STEPS)
    strength: float = Field(gt=0.0, le=1.0)


class PhoneTokens(_Tolerant):
    template: int = Field(ge=0)
    image: int = Field(ge=0)
    text: int = Field(ge=0)


class _Body(BaseModel):
    """The fields and lookups both views share; the lists' entry types are each view's own."""

    template_id: str = Field(pattern=TEMPLATE_ID_PATTERN)
    version: int = Field(ge=1, le=MAX_VERSION)
    task: str = Field(max_length=64)
    prompt: str = Field(max_length=_TEXT)
    resolution: int = Field(gt=0, le=MAX_RESOLUTION)
    content_hash: str = Field(pattern=_SHA256)
    kv_bytes_fp16: int = Field(ge=0)
    if TYPE_CHECKING:  # each view declares these lists with its own entry types
        levels: list[Any]
        context: list[Any]
        source: list[Any]
        images: list[Any]
        shards: list[Any]

    def level(self, name: str) -> Any:
        for level in self.levels:
            if level.name == name:
                return level
        raise ManifestError(f"{self.template_id} v{self.version} has no level {name!r}")

    def context_object(self, name: str) -> Any:
        return self._named(self.context, name, "context object")

    def source_object(self, name: str) -> Any:
        """A source object or the template's image (both are served as source objects)."""
        return self._named([*self.source, *self.images], name, "source object")

    def bundle(self, *, context: bool, source: bool, images: bool) -> list[tuple[str, Any]]:
        """The objects a preamble carries (``http_api.PREAMBLE``) as (kind, entry), in the order it
        carries them: context, source, images (served as source objects)."""
        return ([("context", e) for e in (self.context if context else [])]
                + [("source", e) for e in (self.source if source else [])]
                + [("source", e) for e in (self.images if images else [])])

    def shard_digests(self) -> bytes:
        """The shard hashes object (:class:`PhoneHashes`) of a manifest that lists its shards' sha256s."""
        names = [level.name for level in self.levels]
        return b"".join(bytes.fromhex(shard.levels[name].sha256) for shard in self.shards for name in names)

    def _named(self, entries: list, name: str, what: str) -> Any:
        for entry in entries:
            if entry.name == name:
                return entry
        raise ManifestError(f"{self.template_id} v{self.version} has no {what} {name!r}")

    def shard(self, index: int) -> Any:
        shards = self.shards
        if not 0 <= index < len(shards):
            raise ManifestError(f"{self.template_id} v{self.version} has no shard {index}")
        return shards[index]

    @classmethod
    def _validated(cls, raw: dict) -> Any:
        try:
            manifest = cls.model_validate(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise ManifestError(f"invalid manifest: {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
        names = [level.name for level in manifest.levels]
        objects = [entry.name for entry in [*manifest.context, *manifest.source, *manifest.images]]
        if len(set(names)) != len(names) or len(set(objects)) != len(objects):
            raise ManifestError("invalid manifest: a level, context or source object or image is listed twice")
        if any(set(s.levels) != set(names) for s in manifest.shards):
            raise ManifestError("invalid manifest: a shard lacks a level")
        if [s.index for s in manifest.shards] != list(range(len(manifest.shards))):
            raise ManifestError("invalid manifest: shard indexes are not 0..n-1")
        hashes = getattr(manifest, "shard_hashes", None)
        if hashes is not None and hashes.length != len(manifest.shards) * len(names) * DIGEST_BYTES:
            raise ManifestError("invalid manifest: shard_hashes is not a digest per shard and level")
        hashed = {p.sha256 is not None for s in manifest.shards for p in s.levels.values()}
        if hashed != {True} and (hashed != {False} or hashes is None):
            raise ManifestError("invalid manifest: shards lack their sha256 and no shard_hashes lists them")
        return manifest


class PhoneManifest(_Body, _Tolerant):
    """The manifest as a phone receives it (``GET .../manifest`` and the preamble)."""

    schema_version: str = Field(default=PHONE_SCHEMA_VERSION, pattern=_SCHEMA.pattern)
    model: PhoneModel
    schedule: PhoneSchedule
    tokens: PhoneTokens
    levels: list[PhoneLevel] = Field(min_length=1, max_length=MAX_LEVELS)  # smallest first
    shards: list[PhoneShard] = Field(min_length=1, max_length=MAX_SHARDS)  # in the order the model consumes them
    context: list[PhoneObject] = Field(default_factory=list, max_length=MAX_LEVELS)
    source: list[PhoneObject] = Field(default_factory=list, max_length=MAX_LEVELS)
    images: list[PhoneImage] = Field(default_factory=list, max_length=MAX_LEVELS)
    #: The shard hashes object (None from a server older than 1.2, whose manifests list every sha256).
    shard_hashes: PhoneHashes | None = None

    def readable_levels(self) -> list[str]:
        """The levels this phone's decoder reads (format versions it knows), smallest first; the
        others are never fetched. A manifest is useless to it with none, unless it computes."""
        return [level.name for level in self.levels if level.format in FORMAT_VERSIONS]

    @property
    def hashed(self) -> bool:
        """Whether this manifest lists its shards' sha256s (else :meth:`with_hashes` adds them)."""
        return self.shards[0].levels[self.levels[0].name].sha256 is not None

    def without_hashes(self) -> PhoneManifest:
        """This manifest without its shards' sha256s (what ``?hashes=0`` sends); needs ``shard_hashes``."""
        if self.shard_hashes is None:
            raise ManifestError("a manifest without shard_hashes cannot leave its shards' sha256s out")
        return self._with_digests([None] * (len(self.shards) * len(self.levels)))

    def with_hashes(self, digests: bytes) -> PhoneManifest:
        """This manifest with its shards' sha256s from the shard hashes object ``digests`` (untrusted
        bytes: checked against ``shard_hashes`` first)."""
        ref = self.shard_hashes
        if ref is None or len(digests) != ref.length or hashlib.sha256(digests).hexdigest() != ref.sha256:
            raise ManifestError("shard hashes object does not match the manifest's shard_hashes")
        return self._with_digests([digests[i:i + DIGEST_BYTES].hex() for i in range(0, len(digests), DIGEST_BYTES)])

    def _with_digests(self, digests: list[str | None]) -> PhoneManifest:
        names, it = [level.name for level in self.levels], iter(digests)
        shards = [shard.model_copy(update={"levels": {name: shard.levels[name].model_copy(update={"sha256": next(it)})
                                                      for name in names}}) for shard in self.shards]
        return self.model_copy(update={"shards": shards})

    def to_json(self) -> bytes:
        """Compact, sorted JSON: the encoding the golden fixture pins (a shard's sha256 left out,
        not null, when the manifest is sent without them)."""
        doc = self.model_dump(mode="json")
        for shard in doc["shards"]:
            for payload in shard["levels"].values():
                if payload["sha256"] is None:
                    del payload["sha256"]
        return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()

    def to_wire(self) -> bytes:
        """What phones receive: the JSON as one zstd frame (a sha256 per shard and level makes
        manifests of per-step models megabytes of mostly hex and key names). Level 9: 20 ms for a
        1,596-shard manifest, within 10% of level 19's size at a fifteenth of its time."""
        return zstandard.ZstdCompressor(level=9, write_content_size=True).compress(self.to_json())

    @classmethod
    def from_wire(cls, data: bytes) -> PhoneManifest:
        """A manifest sent as JSON or as a zstd frame of it; never more than ``MAX_MANIFEST_BYTES``
        decoded. Unknown fields are ignored; a major ``schema_version`` other than ours is refused."""
        raw = _load_json(_unframe(data) if data[:4] == _ZSTD_MAGIC else data)
        version = raw.get("schema_version")
        match = _SCHEMA.match(version) if isinstance(version, str) else None
        major = int(match.group(1)) if match else version if type(version) is int else None
        if major != _PHONE_MAJOR:
            newer = isinstance(major, int) and major > _PHONE_MAJOR
            hint = " (this app is older than the server: update it)" if newer else ""
            raise ManifestError(f"unsupported manifest schema_version {version!r}{hint}")
        return cls._validated({**raw, "schema_version": version if match else f"{major}.0"})


# -- what the library stores ---------------------------------------------------------------
class ShardLocation(ShardPayload):
    """One shard at one level: a row group of the level file, and the payload's bytes in it."""

    model_config = _STRICT
    sha256: str = Field(pattern=_SHA256)  # the library always lists it
    row_group: int = Field(ge=0)
    row_group_offset: int = Field(ge=0)
    row_group_length: int = Field(gt=0)
    offset: int = Field(ge=0)


class ShardEntry(PhoneShard):
    model_config = _STRICT
    levels: dict[str, ShardLocation]  # type: ignore[assignment]  # narrows the phone view's payloads


class LevelEntry(PhoneLevel):
    model_config = _STRICT
    #: Root URI of the tier holding this level's file; None: the library's own root (so a
    #: single-root library can be moved or copied whole).
    store: str | None = Field(default=None, max_length=_TEXT)
    key: str = Field(max_length=1024)  # object key of the level file under that root


class ContextEntry(PhoneObject):
    model_config = _STRICT
    key: str = Field(max_length=1024)


class ImageEntry(PhoneImage):
    model_config = _STRICT
    key: str = Field(max_length=1024)


class ModelRef(PhoneModel):
    model_config = _STRICT


class ScheduleRef(PhoneSchedule):
    model_config = _STRICT


class TokenLayout(PhoneTokens):
    model_config = _STRICT


class Manifest(_Body):
    model_config = _STRICT
    schema_version: Literal[1] = SCHEMA_VERSION
    model: ModelRef
    schedule: ScheduleRef
    tokens: TokenLayout
    created_at: str = Field(max_length=64)
    importance_key: str | None = Field(default=None, max_length=1024)
    levels: list[LevelEntry] = Field(min_length=1, max_length=MAX_LEVELS)  # smallest first
    shards: list[ShardEntry] = Field(min_length=1, max_length=MAX_SHARDS)  # in the order the model consumes them
    context: list[ContextEntry] = Field(default_factory=list, max_length=MAX_LEVELS)
    #: What the phone needs to compute the template KV itself (``ModelAdapter.template_source``),
    #: stored and served like context objects; names are unique across both lists.
    source: list[ContextEntry] = Field(default_factory=list, max_length=MAX_LEVELS)
    #: The template's published image, from which a phone's own image codec makes ``source``
    #: (the KV and ``source`` were built from the pixels it decodes to).
    images: list[ImageEntry] = Field(default_factory=list, max_length=MAX_LEVELS)

    def to_bytes(self) -> bytes:
        return json.dumps(self.model_dump(mode="json"), indent=1, sort_keys=True).encode()

    def for_phone(self) -> PhoneManifest:
        """The phone-facing view: the fields :class:`PhoneManifest` knows, nothing else."""
        digests = self.shard_digests()
        hashes = {"length": len(digests), "sha256": hashlib.sha256(digests).hexdigest()}
        return PhoneManifest.model_validate({**self.model_dump(mode="json"), "schema_version": PHONE_SCHEMA_VERSION,
                                             "shard_hashes": hashes})

    @classmethod
    def from_bytes(cls, data: bytes) -> Manifest:
        raw = _load_json(data)
        if raw.get("schema_version") != SCHEMA_VERSION:
            raise ManifestError(f"unsupported manifest schema_version {raw.get('schema_version')!r}")
        return cls._validated(raw)


def _unframe(data: bytes) -> bytes:
    """One zstd frame's content: the frame must declare its size (ours always do), at most
    ``MAX_MANIFEST_BYTES``, before anything is allocated for it."""
    try:
        size = zstandard.frame_content_size(data)
        if not 0 <= size <= MAX_MANIFEST_BYTES:
            raise ManifestError("manifest is too large" if size > 0 else "manifest frame does not declare its size")
        frame = zstandard.ZstdDecompressor().decompressobj()
        out = frame.decompress(data)
    except zstandard.ZstdError as exc:
        raise ManifestError(f"manifest is not valid zstd: {exc}") from None
    if len(out) != size or not frame.eof or frame.unused_data:
        raise ManifestError("manifest is not valid zstd: not one whole frame of the size it declares")
    return out


def _load_json(data: bytes) -> dict:
    if len(data) > MAX_MANIFEST_BYTES:
        raise ManifestError("manifest is too large")
    try:
        raw = json.loads(data)
    except ValueError as exc:  # not UTF-8, not JSON, or a number too long for int() (CPython's digit limit)
        raise ManifestError(f"manifest is not JSON: {exc}") from None
    except RecursionError:
        raise ManifestError("manifest JSON is nested too deeply") from None
    if not isinstance(raw, dict):
        raise ManifestError("manifest is not a JSON object")
    return raw


class AliasDoc(BaseModel):
    model_config = _STRICT
    version: int = Field(ge=1)
    #: ``latest`` as an operator set it (a rollback or a pin): builds leave it unless told to move it.
    held: bool = False

    def to_bytes(self) -> bytes:
        return json.dumps({"version": self.version, **({"held": True} if self.held else {})}).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> AliasDoc:
        try:
            return cls.model_validate_json(data)
        except ValidationError as exc:
            raise ManifestError(f"invalid alias document: {exc.errors()[0]['msg']}") from None
