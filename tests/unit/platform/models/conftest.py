"""The tiny FLUX.2 [klein] pipeline folder the klein tests share: exported once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from sakura.platform.models import ModelAdapter, load_model
from sakura.platform.models.pipelines.tiny import export


@pytest.fixture(scope="session")
def klein_folder(tmp_path_factory) -> Path:
    return export("tiny-klein", tmp_path_factory.mktemp("pipelines") / "tiny-klein")


@pytest.fixture(scope="session")
def klein(klein_folder) -> ModelAdapter:
    """The whole pipeline, as the cloud loads it (text encoder included)."""
    return load_model(str(klein_folder))
