"""What the edge client accepts from a server, checked against the model it runs.

The manifest schema (:mod:`sakura.platform.manifest`) bounds every field and checks every name
against the project's grammars (template ids, versions, level names) before anything uses it.
Here every number that would size an allocation, a loop, a read or a decode is checked against
the on-device model, never taken from the server: the resolution, the schedule's shard keys and
their order (the order replay reads them, so the bounded pipeline cannot deadlock), each shard's
shape, and each payload's length (at most the largest valid payload of that shape).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sakura.platform.codec import max_payload_bytes
from sakura.platform.context import max_encoded_bytes
from sakura.platform.kv import KVGeometry
from sakura.platform.manifest import ManifestError, PhoneImage, PhoneManifest, PhoneObject
from sakura.platform.models import ModelAdapter
from sakura.platform.template_image import max_jpeg_bytes


@dataclass(frozen=True)
class ShardLimits:
    """What every shard of an accepted manifest must be, derived from the model."""

    geometry: KVGeometry
    max_payload_bytes: int

    @property
    def max_output_bytes(self) -> int:
        return self.geometry.shard_nbytes


def check_request(manifest: PhoneManifest, template: str, version: int | None) -> None:
    """The server answered what was asked for (a numeric version exactly; an alias any version)."""
    if manifest.template_id != template or (version is not None and manifest.version != version):
        asked = f"v{version}" if version is not None else "an alias"
        raise ManifestError(f"asked for {template} {asked}, the server sent {manifest.template_id} v{manifest.version}")


#: Denoising steps an edit may ask this device for (a step-independent template says how many
#: steps to run, and each costs the phone a model pass). DiT editing pipelines run 4 (FLUX.2
#: klein) to 28-50 (FLUX.1 Kontext, SD3); 100 is an estimate with room to spare.
MAX_EDIT_STEPS = 100


def accept_manifest(manifest: PhoneManifest, adapter: ModelAdapter, *, max_steps: int = MAX_EDIT_STEPS) -> ShardLimits:
    """Check a manifest against the model that will replay it; raise :class:`ManifestError`."""
    where = f"{manifest.template_id} v{manifest.version}"
    if manifest.schedule.steps > max_steps:
        raise ManifestError(f"{where}: asks for {manifest.schedule.steps} denoising steps; "
                            f"this device runs at most {max_steps}")
    if manifest.resolution != adapter.resolution:
        raise ManifestError(f"{where}: resolution {manifest.resolution}, the model works at {adapter.resolution}")
    geometry = adapter.kv_geometry(manifest.schedule.steps)
    keys = tuple(shard.key for shard in manifest.shards)
    if keys != geometry.keys:
        raise ManifestError(f"{where}: its {len(keys)} shards are not the {len(geometry.keys)} shards the model reads "
                            f"for {manifest.schedule.steps} steps, in the order it reads them")
    if manifest.tokens.template != geometry.shape[1]:
        raise ManifestError(f"{where}: {manifest.tokens.template} template tokens, "
                            f"the model expects {geometry.shape[1]}")
    limit = max_payload_bytes(geometry.shape, geometry.dtype)
    for shard in manifest.shards:
        if tuple(shard.shape) != geometry.shape:
            raise ManifestError(f"{where}: shard {shard.index} has shape {tuple(shard.shape)}, "
                                f"the model's KV is {geometry.shape}")
        for level, location in shard.levels.items():
            if location.length > limit:
                raise ManifestError(f"{where}: shard {shard.index} at {level!r} claims {location.length} bytes; "
                                    f"no valid payload of shape {geometry.shape} exceeds {limit}")
    _check_objects(manifest.context, adapter.context_limits(), f"{where}: context object")
    _check_objects(manifest.source, adapter.source_limits(), f"{where}: source object")
    if adapter.computes_template:
        _check_images(manifest.images, adapter.resolution, f"{where}: image")
    return ShardLimits(geometry, limit)


def _check_images(entries: list[PhoneImage], resolution: int, what: str) -> None:
    """The template's images are of the model's size, each length bounded."""
    for entry in entries:
        if (entry.width, entry.height) != (resolution, resolution):
            raise ManifestError(f"{what} {entry.name!r} is {entry.width}x{entry.height}; "
                                f"the model takes {resolution}x{resolution}")
        if entry.length > max_jpeg_bytes(entry.width, entry.height):
            raise ManifestError(f"{what} {entry.name!r} claims {entry.length} bytes, more than a "
                                f"{entry.width}x{entry.height} JPEG may have")


def _check_objects(entries: list[PhoneObject], limits: dict[str, tuple[int, ...]], what: str) -> None:
    """Context or source objects the model takes, no larger than it takes them, each length bounded."""
    for entry in entries:
        largest = limits.get(entry.name)
        if largest is None:
            raise ManifestError(f"{what} {entry.name!r} is not one the model takes ({sorted(limits)})")
        if len(entry.shape) != len(largest) or any(n > m for n, m in zip(entry.shape, largest)):
            raise ManifestError(f"{what} {entry.name!r} has shape {tuple(entry.shape)}; "
                                f"the model takes at most {largest}")
        if entry.length > max_encoded_bytes(tuple(entry.shape), entry.dtype, entry.encoding):
            raise ManifestError(f"{what} {entry.name!r} claims {entry.length} bytes, more than "
                                f"any encoding of {tuple(entry.shape)} {entry.dtype}")


def made_fits(made: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]]) -> bool:
    """Arrays the phone made itself and kept (a template's source or its prompt's embeddings) are
    exactly the objects ``shapes`` names, each of its shape, finite: a kept file that passed its own
    sha256 but is not (tampering, or an app update that changed what the model makes) is a cache
    miss, made again, never an error of the edit (the cache never fails one)."""
    if set(made) != set(shapes):
        return False
    return all(tuple(made[name].shape) == tuple(shape) and made[name].dtype.kind in "fiu"
               and (made[name].dtype.kind != "f" or bool(np.isfinite(made[name]).all()))
               for name, shape in shapes.items())

