"""Build one template: capture its KV, score importance, encode every level, write the files.

Plain Python (no Ray): the build job runs one :class:`TemplateBuilder` per Ray actor, and tests
run it directly. Publishing (the manifest) is the driver's job, after every file is written.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sakura.platform import layout
from sakura.platform.codec import LevelSpec, QueryProbe, encode_levels
from sakura.platform.context import LOWRANK, ZSTD, code_within_parity, encode_context
from sakura.platform.images import fit_image, image_bytes_identity, load_image
from sakura.platform.importance import from_attention, from_key_norms
from sakura.platform.kv import TemplateKV
from sakura.platform.levelfile import ShardRow, build_level_file
from sakura.platform.library import TemplateLibrary, write_once
from sakura.platform.manifest import (
    ContextEntry,
    ImageEntry,
    LevelEntry,
    Manifest,
    ModelRef,
    ScheduleRef,
    ShardEntry,
    TokenLayout,
)
from sakura.platform.models import EditRequest, ModelAdapter, Schedule, Template, load_model, query_probe
from sakura.platform.spec import TemplateEntry
from sakura.platform.template_image import IMAGE_FORMAT, TEMPLATE_IMAGE, template_for
from sakura.platform.verify import PARITY_MAX_ABS

#: Calibration photos (user-side images whose attention ranks template tokens), per task.
CALIBRATION = {
    "face_swap": ["skimage:lfw_subset/90", "skimage:lfw_subset/91", "skimage:lfw_subset/92"],
    "default": ["skimage:chelsea", "skimage:rocket", "skimage:astronaut"],
}


@dataclass(frozen=True)
class BuildSettings:
    """Everything besides the template that determines a build's bytes (part of the content hash)."""

    model: str
    levels: tuple[LevelSpec, ...]
    steps: int
    strength: float = 1.0
    calibration: int = 2
    store: str = ""
    tiers: tuple[tuple[str, str], ...] = ()

    def hash_material(self) -> dict:
        # format 2: versions ship source objects; 3: the template's image, published as a JPEG, which
        # everything is built from; 4: transform levels measure their error on the first calibration
        # edit's queries, and context objects are coded within the parity tolerance. A rebuild of an
        # older format's version publishes anew.
        return {"levels": [lv.model_dump(mode="json") for lv in self.levels], "steps": self.steps,
                "strength": self.strength, "calibration": self.calibration, "format": 4}


@dataclass
class BuildJob:
    entry: TemplateEntry
    base_dir: str
    version: int
    content_hash: str


@dataclass
class BuildOutcome:
    template_id: str
    version: int
    manifest: Manifest
    seconds: float
    level_bytes: dict[str, int] = field(default_factory=dict)
    node: str = ""  # the Ray node that built it, where one did


def content_hash(entry: TemplateEntry, base_dir, fingerprint: str, settings: BuildSettings) -> str:
    """sha256 of the spec entry, the image's bytes, the model fingerprint and the codec settings."""
    h = hashlib.sha256()
    h.update(json.dumps(entry.model_dump(mode="json"), sort_keys=True).encode())
    h.update(hashlib.sha256(image_bytes_identity(entry.image, base_dir)).digest())
    h.update(fingerprint.encode())
    h.update(json.dumps(settings.hash_material(), sort_keys=True).encode())
    return h.hexdigest()


class TemplateBuilder:
    def __init__(self, settings: BuildSettings, adapter: ModelAdapter | None = None,
                 threads: int | None = None) -> None:
        if threads:
            import torch

            torch.set_num_threads(threads)  # one actor per CPU share: don't oversubscribe the node
        self.settings = settings
        self.adapter = adapter or load_model(settings.model)

    @functools.cached_property
    def library(self) -> TemplateLibrary:
        """Where this builder writes: the library decides which store keeps each level."""
        return TemplateLibrary.open(self.settings.store, dict(self.settings.tiers))

    def _write_context(self, template_id: str, version: int, name: str, array, coded: bytes | None = None
                       ) -> ContextEntry:
        """A context or source object (prompt embeddings, reference latents), next to the
        version's other files; both kinds share one name space (the manifest checks it). ``coded``:
        the array transform-coded (:func:`code_within_parity`), shipped instead of its zstd bytes."""
        data, shape, dtype = encode_context(array)
        if coded is not None:
            data = coded
        key = layout.context_key(template_id, version, name)
        write_once(self.library.store, key, data)
        return ContextEntry(name=name, key=key, shape=shape, dtype=dtype, length=len(data),
                            sha256=hashlib.sha256(data).hexdigest(), encoding=LOWRANK if coded else ZSTD)

    def _coded_context(self, kv: TemplateKV, template: Template, photos: list[str], schedule: Schedule,
                       context: dict[str, np.ndarray]) -> dict[str, bytes]:
        """Each context object that codes smaller while every calibration edit's image stays within
        half the parity tolerance of its image with the object as it is (:func:`code_within_parity`;
        half: a margin for requests the build never saw, an estimate). Source objects are never
        coded: the phone computes KV from them, which must equal the capture's."""
        if not context:
            return {}
        res = self.adapter.resolution
        requests = [EditRequest(fit_image(load_image(p), res), seed=i) for i, p in enumerate(photos)]

        def edits(ctx: dict[str, np.ndarray]) -> list[np.ndarray]:
            return [self.adapter.edit_image(kv, template.prompt, r, schedule, context=ctx) for r in requests]

        exact = edits(context)
        coded = {}
        for name, array in sorted(context.items()):
            def within(decoded: np.ndarray, name: str = name) -> bool:
                return all(float(np.abs(a - b).max()) <= PARITY_MAX_ABS / 2
                           for a, b in zip(edits({**context, name: decoded}), exact))

            data = code_within_parity(array, within)
            if data is not None:
                coded[name] = data
        return coded

    def _write_image(self, template_id: str, version: int, jpeg: bytes, resolution: int) -> ImageEntry:
        key = layout.image_key(template_id, version, TEMPLATE_IMAGE)
        write_once(self.library.store, key, jpeg)
        return ImageEntry(name=TEMPLATE_IMAGE, key=key, format=IMAGE_FORMAT, width=resolution, height=resolution,
                          length=len(jpeg), sha256=hashlib.sha256(jpeg).hexdigest())

    def _probes(self, kv: TemplateKV, template: Template, photo: str, schedule: Schedule,
                context: dict) -> list[QueryProbe | None] | None:
        """Each shard's queries in the first calibration edit, which transform levels measure their
        error on; None where the model exposes no queries (its own keys then stand in)."""
        adapter = self.adapter
        if not adapter.supports_probe:
            return None
        probe: dict = {}
        request = EditRequest(fit_image(load_image(photo), adapter.resolution), seed=0)
        adapter.replay(kv, template.prompt, request, schedule, probe=probe, context=context)
        return [query_probe(probe[key]) if key in probe else None for key in kv.keys]

    def build(self, job: BuildJob) -> BuildOutcome:
        start = time.perf_counter()
        entry, adapter, s = job.entry, self.adapter, self.settings
        res = adapter.resolution
        image = fit_image(load_image(entry.image, Path(job.base_dir)), res)
        template, jpeg = template_for(adapter, image, entry.prompt, entry.task.value)
        images = [self._write_image(entry.id, job.version, jpeg, res)] if jpeg is not None else []
        schedule = Schedule(steps=s.steps, strength=s.strength)
        photos = CALIBRATION.get(entry.task.value, CALIBRATION["default"])[: s.calibration]
        captures = [adapter.capture(template, EditRequest(fit_image(load_image(p), res), seed=i), schedule)
                    for i, p in enumerate(photos)]
        kv = captures[0].kv
        # Models on a pipeline's own KV seam expose no attention probabilities: rank by key norm.
        if captures[0].attention_mass:
            scores = from_attention(c.attention_mass for c in captures)
        else:
            scores = from_key_norms(kv)
        keys = kv.keys
        template_context = adapter.template_context(template)
        probes = (self._probes(kv, template, photos[0], schedule, template_context)
                  if any(level.transform for level in s.levels) else None)
        levels, locations = [], {}
        coded_levels = encode_levels([kv[key] for key in keys], s.levels, [scores[key] for key in keys], probes)
        for level in s.levels:
            payloads = coded_levels[level.name]
            data, locs = build_level_file([ShardRow(i, key, p) for i, (key, p) in enumerate(zip(keys, payloads))])
            object_key = layout.level_key(entry.id, job.version, level.name)
            write_once(self.library.tier(level.name), object_key, data)  # never overwrites another build's file
            levels.append(LevelEntry(name=level.name, store=self.library.tier_uri(level.name), key=object_key,
                                     bytes=len(data), spec=level.model_dump(mode="json"), format=level.format))
            locations[level.name] = locs
        importance_key = layout.importance_key(entry.id, job.version)
        write_once(self.library.store, importance_key, scores.to_bytes())
        coded = self._coded_context(kv, template, photos, schedule, template_context)
        context = [self._write_context(entry.id, job.version, name, array, coded.get(name))
                   for name, array in sorted(template_context.items())]
        source = [self._write_context(entry.id, job.version, name, array)
                  for name, array in sorted(adapter.template_source(template).items())]
        info = adapter.info()
        weights = {key: float(scores[key].sum(axis=1).mean()) for key in keys}
        manifest = Manifest(
            template_id=entry.id, version=job.version, task=entry.task.value, prompt=entry.prompt, resolution=res,
            content_hash=job.content_hash, created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            model=ModelRef(name=s.model, family=info.family, fingerprint=adapter.fingerprint, layers=info.layers,
                           heads=info.heads, head_dim=info.head_dim, step_dependent=info.step_dependent),
            schedule=ScheduleRef(steps=s.steps, strength=s.strength),
            tokens=TokenLayout(template=kv.template_tokens, image=info.image_tokens, text=info.text_tokens),
            kv_bytes_fp16=kv.nbytes_fp16, importance_key=importance_key,
            levels=levels,
            shards=[ShardEntry(index=i, step=key.step, layer=key.layer, shape=kv[key].k.shape, weight=weights[key],
                               levels={lv.name: locations[lv.name][i] for lv in s.levels})
                    for i, key in enumerate(keys)],
            context=context,
            source=source,
            images=images,
        )
        return BuildOutcome(entry.id, job.version, manifest, time.perf_counter() - start,
                            {lv.name: lv.bytes for lv in levels})
