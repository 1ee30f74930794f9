"""The manifest schema bounds every field a server sends and checks names against the grammars
(the same model reads manifests on the server and on phones)."""

from __future__ import annotations

import json

import pytest

from sakura.platform.manifest import MAX_LEVELS, Manifest, ManifestError
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
def test_out_of_bounds_fields_and_bad_names_are_refused(genuine, change):
    with pytest.raises(ManifestError):
        Manifest.from_bytes(_with(genuine, change))


def test_deeply_nested_json_is_a_manifest_error():
    with pytest.raises(ManifestError, match="nested"):
        Manifest.from_bytes(b"[" * 100_000 + b"]" * 100_000)


def test_the_genuine_manifest_round_trips(genuine):
    assert json.loads(Manifest.from_bytes(json.dumps(genuine).encode()).to_bytes()) == genuine
