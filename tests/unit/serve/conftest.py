"""A small library built once per session; tests that break it get their own copy."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers import make_library


@pytest.fixture(scope="session")
def built_library(tmp_path_factory) -> Path:
    """Two versions of ``tpl`` (``latest`` -> 2). Read-only: copy it (``library_dir``) to change it."""
    root = tmp_path_factory.mktemp("built") / "lib"
    make_library(f"file://{root}", ["skimage:brick", "skimage:grass"])
    return root


@pytest.fixture
def library_dir(built_library, tmp_path) -> Path:
    """A private copy of the built library, free to break."""
    return Path(shutil.copytree(built_library, tmp_path / "lib"))
