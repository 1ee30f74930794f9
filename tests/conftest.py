"""Shared fixtures: seeded tiny models and the real images scikit-image ships."""

from __future__ import annotations

import pytest

from sakura.platform.images import fit_image, load_image
from sakura.platform.models import EditRequest, ModelAdapter, Schedule, Template, load_model

FAMILIES = ["tiny-flux", "tiny-sd3"]


@pytest.fixture(scope="session", params=FAMILIES)
def adapter(request: pytest.FixtureRequest) -> ModelAdapter:
    return load_model(request.param)


def make_template(adapter: ModelAdapter, ref: str = "skimage:brick", prompt: str = "a brick wall texture") -> Template:
    return Template(fit_image(load_image(ref), adapter.resolution), prompt)


def make_request(adapter: ModelAdapter, ref: str, seed: int) -> EditRequest:
    return EditRequest(fit_image(load_image(ref), adapter.resolution), seed=seed)


@pytest.fixture(scope="session")
def schedule() -> Schedule:
    return Schedule(steps=4)
