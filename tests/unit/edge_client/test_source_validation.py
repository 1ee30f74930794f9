"""Source objects in a manifest are checked against the model on the device, like context
objects: names it takes, shapes no larger than it takes them, lengths any encoding could have;
the template's image is of the model's size and no longer than such a JPEG may be."""

from __future__ import annotations

import pytest

from sakura.edge_client._validation import accept_manifest
from sakura.platform.library import TemplateLibrary
from sakura.platform.manifest import Manifest, ManifestError
from sakura.platform.store import open_store


@pytest.fixture(scope="module")
def manifest(ref_library) -> Manifest:
    return TemplateLibrary(open_store(ref_library)).manifest("portrait", 1)


def _with_source(manifest: Manifest, **change) -> Manifest:
    return manifest.model_copy(update={"source": [manifest.source[0].model_copy(update=change)]})


def test_the_published_source_is_accepted(manifest, reference_model):
    assert [entry.name for entry in manifest.source] == list(reference_model.source_limits())
    assert [(i.width, i.height) for i in manifest.images] == [(reference_model.resolution,) * 2]
    accept_manifest(manifest, reference_model)


@pytest.mark.parametrize("change, message", [
    ({"width": 64}, "is 64x32"),
    ({"length": 10**7}, "more than a 32x32 JPEG may have"),
], ids=["size", "length"])
def test_an_image_other_than_the_models_is_refused(manifest, reference_model, change, message):
    image = manifest.images[0].model_copy(update=change)
    with pytest.raises(ManifestError, match=message):
        accept_manifest(manifest.model_copy(update={"images": [image]}), reference_model)


@pytest.mark.parametrize("change, message", [
    ({"name": "reference_latents"}, "not one the model takes"),
    ({"shape": (257, 12)}, "at most"),
    ({"shape": (256, 12, 1)}, "at most"),
    ({"length": 10**9}, "claims"),
], ids=["unknown-name", "too-many-tokens", "extra-dim", "length"])
def test_source_entries_outside_the_models_limits_are_refused(manifest, reference_model, change, message):
    with pytest.raises(ManifestError, match=message) as err:
        accept_manifest(_with_source(manifest, **change), reference_model)
    assert "source object" in str(err.value)


def test_a_model_that_cannot_compute_takes_no_source(manifest, reference_model, monkeypatch):
    monkeypatch.setattr(reference_model, "source_limits", lambda: {})
    with pytest.raises(ManifestError, match="not one the model takes"):
        accept_manifest(manifest, reference_model)
