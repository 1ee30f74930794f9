"""The templates an evaluation runs on: the example templates, built for the reference model
into a library (in process), read back as a phone would get them, with each task's user photo."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sakura.examples import TEMPLATES
from sakura.platform.codec import LevelSpec
from sakura.platform.errors import SakuraError
from sakura.platform.images import fit_image, load_image
from sakura.platform.levelfile import read_shard_payload
from sakura.platform.library import TemplateLibrary
from sakura.platform.manifest import Manifest
from sakura.platform.models import EditRequest, Template
from sakura.platform.spec import TemplateSpec, load_spec
from sakura.platform.template_image import decode_published

#: The user's photo for each task (none of them a template image).
USER_PHOTOS = {"face_swap": "skimage:lfw_subset/93", "try_on": "skimage:chelsea", "style_transfer": "skimage:astronaut"}
DEFAULT_PHOTO = "skimage:rocket"


@dataclass
class TemplateCase:
    manifest: Manifest
    payloads: dict[str, list[bytes]]  # level -> encoded shard payloads, in consumption order
    template: Template
    request: EditRequest


def build_examples(store_uri: str, spec: TemplateSpec, model: str = "reference", steps: int | None = None,
                   levels: tuple[LevelSpec, ...] | None = None) -> None:
    """Build and publish, through the build job (in this process, no Ray), every template of
    ``spec`` the library lacks, for ``steps`` denoising steps (default: the model's), at ``levels``
    (default: the build's)."""
    from sakura.jobs.build import build_in_process

    rows = build_in_process(spec, store_uri, model=model, steps=steps, levels=levels)
    failed = [row for row in rows if row.status == "failed"]
    if failed:
        raise SakuraError("building the evaluation's templates failed: "
                          + "; ".join(f"{row.template_id}: {row.error}" for row in failed))


def load_cases(store_uri: str, spec: TemplateSpec, resolution: int) -> list[TemplateCase]:
    library = TemplateLibrary.open(store_uri)
    cases = []
    for entry in spec.templates:
        manifest = library.manifest(entry.id)
        payloads = {}
        for level in manifest.levels:
            store = library.level_store(level)
            payloads[level.name] = [read_shard_payload(store, level.key, s.levels[level.name]) for s in manifest.shards]
        image = _published_image(library, manifest)
        if image is None:
            image = fit_image(load_image(entry.image, spec.base_dir), resolution)
        photo = fit_image(load_image(USER_PHOTOS.get(entry.task.value, DEFAULT_PHOTO)), resolution)
        template = Template(image, entry.prompt, entry.task.value)
        cases.append(TemplateCase(manifest, payloads, template, EditRequest(photo, seed=1)))
    return cases


def _published_image(library: TemplateLibrary, manifest: Manifest) -> np.ndarray | None:
    """The template's image as its version was built from it: the published JPEG's pixels, if it has one."""
    if not manifest.images:
        return None
    image = manifest.images[0]
    return decode_published(library.store.get(image.key), image.width, image.height)


def example_spec(path: Path = TEMPLATES) -> TemplateSpec:
    return load_spec(path)
