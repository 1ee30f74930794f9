"""Shared by the unit tests of the phone library and of ``sakura edit``: a reference-model template
library served by the real shard API (uvicorn, no Ray); and by the tests of the benches' docs
tooling: ``bench/tables.py`` and ``bench/_provenance.py`` imported, ``bench/out`` moved aside."""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import pytest

from tests.edge_servers import ApiServer
from tests.helpers import bench_module, make_builder, publish

TEMPLATES = {"portrait": "skimage:astronaut", "scenery": "skimage:chelsea"}


@pytest.fixture(scope="session")
def ref_library(tmp_path_factory) -> str:
    from sakura.platform.library import TemplateLibrary
    from sakura.platform.store import open_store

    uri = f"file://{tmp_path_factory.mktemp('edge-lib')}"
    library = TemplateLibrary(open_store(uri))
    builder = make_builder("reference", steps=4)
    for template_id, image in TEMPLATES.items():
        publish(library, builder, uri, template_id, image)
    return uri


@pytest.fixture(scope="session")
def api(ref_library) -> Iterator[ApiServer]:
    with ApiServer(ref_library) as server:
        yield server


@pytest.fixture(scope="session")
def reference_model():
    from sakura.platform.models import load_model

    return load_model("reference")


@pytest.fixture(scope="module")
def tables():
    yield from bench_module("tables")


@pytest.fixture
def provenance_module():
    yield from bench_module("_provenance")


@pytest.fixture
def bench_out(tables, tmp_path, monkeypatch):
    """``bench/out`` moved to ``tmp_path`` for ``_load``, with the staleness caches emptied on both
    sides of the test."""
    sources = importlib.import_module("_sources")
    monkeypatch.setattr(sources, "OUT", tmp_path)
    caches = (sources._changed, sources._stale_inputs)
    for cache in caches:
        cache.cache_clear()
    yield tmp_path
    for cache in caches:
        cache.cache_clear()
