"""The manifest schema bounds every field a server sends and checks names against the grammars
(the stored view on the server, the phone-facing view on phones: both refuse the same mistakes)."""

from __future__ import annotations

import json

import pytest

from sakura.platform.manifest import MAX_LEVELS, Manifest, ManifestError, PhoneManifest
from tests.helpers import make_library


@pytest.fixture(scope="module")
def genuine(tmp_path_factory) -> dict:
    library = make_library(f"file://{tmp_path_factory.mktemp('lib')}", ["skimage:brick"])
    return json.loads(library.manifest("tpl", 1).to_bytes())


def _with(doc: dict, change) -> bytes:
    doc = json.loads(json.dumps(doc))
    change(doc)
    return json.dumps(doc).encode()


def _level_named(name):
    def change(doc):
        old = doc["levels"][0]["name"]
        doc["levels"][0]["name"] = name
        for shard in doc["shards"]:
            shard["levels"][name] = shard["levels"].pop(old)
    return change


@pytest.mark.parametrize("change", [
    _level_named("compact/../../../tmp/x"),
    _level_named("Compact"),
    _level_named(""),
    lambda d: d.update(shards=[]),
    lambda d: d.update(levels=[]),
    lambda d: d.update(levels=d["levels"] * (MAX_LEVELS + 1)),
    lambda d: d.update(levels=d["levels"] + d["levels"][:1]),
    lambda d: d.update(version=10**12),
    lambda d: d.update(resolution=10**9),
    lambda d: d.update(prompt="x" * 100_000),
    lambda d: d["schedule"].update(steps=10**6),
    lambda d: d["shards"][0].update(shape=[0, 4, 4]),
    lambda d: d["shards"][0].update(shape=[-1, 4, 4]),
    lambda d: d["shards"][0].update(weight=float("inf")),
    lambda d: d["model"].update(name=""),
], ids=["traversal", "upper-case", "empty-level", "no-shards", "no-levels", "too-many-levels", "duplicate-level",
        "version", "resolution", "prompt", "steps", "zero-dim", "negative-dim", "infinite-weight", "empty-model"])
@pytest.mark.parametrize("read", [Manifest.from_bytes, PhoneManifest.from_wire], ids=["stored", "phone"])
def test_out_of_bounds_fields_and_bad_names_are_refused(genuine, change, read):
    with pytest.raises(ManifestError):
        read(_with(genuine, change))


def test_deeply_nested_json_is_a_manifest_error():
    with pytest.raises(ManifestError, match="nested"):
        Manifest.from_bytes(b"[" * 100_000 + b"]" * 100_000)


@pytest.mark.parametrize("read", [Manifest.from_bytes, PhoneManifest.from_wire], ids=["stored", "phone"])
def test_a_number_too_long_for_int_is_a_manifest_error(genuine, read):
    """5,000 digits: past CPython's int() digit limit, where json.loads raises a bare ValueError."""
    body = json.dumps(genuine).encode().replace(b'"kv_bytes_fp16": ', b'"kv_bytes_fp16": ' + b"9" * 5000 + b', "x": ')
    with pytest.raises(ManifestError, match="not JSON"):
        read(body)


def test_the_genuine_manifest_round_trips(genuine):
    assert json.loads(Manifest.from_bytes(json.dumps(genuine).encode()).to_bytes()) == genuine


@pytest.fixture(scope="module")
def with_source(tmp_path_factory) -> dict:
    """A reference-model manifest: it lists the source the phone computes template KV from."""
    library = make_library(f"file://{tmp_path_factory.mktemp('ref')}", ["skimage:brick"], model="reference")
    return json.loads(library.manifest("tpl", 1).to_bytes())


def test_source_objects_are_listed_and_looked_up_like_context_objects(with_source, genuine):
    manifest = Manifest.from_bytes(json.dumps(with_source).encode())
    assert [entry.name for entry in manifest.source] == ["template_cells"] and manifest.context == []
    assert manifest.source_object("template_cells").shape == (256, 12)
    with pytest.raises(ManifestError, match="no source object"):
        manifest.source_object("prompt_embeds")
    assert json.loads(manifest.to_bytes()) == with_source
    assert genuine["source"] == []  # families that cannot compute template KV ship none
    older = {k: v for k, v in with_source.items() if k != "source"}  # written before source existed
    assert Manifest.from_bytes(json.dumps(older).encode()).source == []


@pytest.mark.parametrize("change", [
    lambda d: d.update(source=d["source"] * 2),
    lambda d: d.update(context=d["source"]),
    lambda d: d["source"][0].update(name="../cells"),
    lambda d: d["source"][0].update(shape=[1] * 5),
    lambda d: d["source"][0].update(dtype="int8"),
    lambda d: d["source"][0].update(length=0),
], ids=["listed-twice", "also-a-context-object", "traversal", "five-dims", "dtype", "empty"])
def test_malformed_source_entries_are_refused(with_source, change):
    with pytest.raises(ManifestError):
        Manifest.from_bytes(_with(with_source, change))
