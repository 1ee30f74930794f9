"""Context objects (e.g. prompt embeddings), source objects (what a phone computes template KV
from) and the template's image (what a phone makes the source from) are served like shard
payloads: immutable, checked against the manifest's sha256, with ETags, Ranges and redirects;
unknown names are 404."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from fastapi.testclient import TestClient

from sakura.platform import http_api, layout
from sakura.platform.context import decode_context, encode_context
from sakura.platform.manifest import Manifest, PhoneManifest
from sakura.platform.template_image import TEMPLATE_IMAGE, decode_published, publish_image
from sakura.serve.api import create_api
from sakura.serve.config import ServeConfig

EMBEDS = np.arange(32 * 6, dtype=np.float32).reshape(32, 6) / 7.0
LATENTS = np.arange(16 * 4, dtype=np.float32).reshape(16, 4) / 3.0
IMAGE = np.linspace(0.0, 1.0, 16 * 16 * 3, dtype=np.float32).reshape(16, 16, 3)


def _entry(library_dir, name: str, array: np.ndarray) -> dict:
    data, shape, dtype = encode_context(array)
    key = layout.context_key("tpl", 2, name)
    (library_dir / key).write_bytes(data)
    return {"name": name, "key": key, "shape": list(shape), "dtype": dtype, "length": len(data),
            "sha256": hashlib.sha256(data).hexdigest()}


@pytest.fixture
def library(library_dir):
    """Version 2 of ``tpl`` rewritten to ship a context and a source object (as a pipeline build would)."""
    manifest_file = library_dir / layout.manifest_key("tpl", 2)
    doc = json.loads(manifest_file.read_bytes())
    doc["context"] = [_entry(library_dir, "prompt_embeds", EMBEDS)]
    doc["source"] = [_entry(library_dir, "reference_latents", LATENTS)]
    jpeg = publish_image(IMAGE)[0]
    key = layout.image_key("tpl", 2, TEMPLATE_IMAGE)
    (library_dir / key).write_bytes(jpeg)
    doc["images"] = [{"name": TEMPLATE_IMAGE, "key": key, "format": "jpeg", "width": 16, "height": 16,
                      "length": len(jpeg), "sha256": hashlib.sha256(jpeg).hexdigest()}]
    manifest_file.write_bytes(Manifest.model_validate(doc).to_bytes())
    return library_dir


def _served_verified(client: TestClient, path: str, entry: dict, expected: np.ndarray):
    """The object at ``path``: its manifest sha256 as a strong ETag, immutable, decoding to
    ``expected``, and 304 when the client has it."""
    r = client.get(path)
    assert r.status_code == 200 and r.headers["etag"] == f'"{entry["sha256"]}"'
    assert "immutable" in r.headers["cache-control"]
    np.testing.assert_array_equal(decode_context(r.content, tuple(entry["shape"]), entry["dtype"]), expected)
    assert client.get(path, headers={"If-None-Match": r.headers["etag"]}).status_code == 304
    return r


def test_a_context_object_is_served_verified_immutable_and_ranged(library):
    client = TestClient(create_api(ServeConfig(store=f"file://{library}", alias_ttl_s=0)))
    entry = client.get(http_api.manifest_path("tpl", 2)).json()["context"][0]
    r = _served_verified(client, http_api.context_path("tpl", 2, "prompt_embeds"), entry, EMBEDS)
    ranged = client.get(http_api.context_path("tpl", 2, "prompt_embeds"), headers={"Range": "bytes=0-9"})
    assert ranged.content == r.content[:10]
    missing = client.get(http_api.context_path("tpl", 2, "pooled"))
    assert missing.status_code == 404 and missing.json()["code"] == "unknown_context"
    assert client.get(http_api.context_path("tpl", 1, "prompt_embeds")).status_code == 404


def test_altered_context_bytes_are_never_served(library):
    key = layout.context_key("tpl", 2, "prompt_embeds")
    (library / key).write_bytes(b"\0" + (library / key).read_bytes()[1:])
    client = TestClient(create_api(ServeConfig(store=f"file://{library}")))
    r = client.get(http_api.context_path("tpl", 2, "prompt_embeds"))
    assert r.status_code == 502 and r.json()["code"] == "shard_corrupt"


def test_a_source_object_is_served_like_a_context_object_and_the_kinds_never_mix(library):
    client = TestClient(create_api(ServeConfig(store=f"file://{library}", alias_ttl_s=0)))
    entry = client.get(http_api.manifest_path("tpl", 2)).json()["source"][0]
    r = _served_verified(client, http_api.source_path("tpl", 2, "reference_latents"), entry, LATENTS)
    ranged = client.get(http_api.source_path("tpl", 2, "reference_latents"), headers={"Range": "bytes=2-5"})
    assert ranged.status_code == 206 and ranged.content == r.content[2:6]
    assert client.get(http_api.source_path("tpl", "latest", "reference_latents")).headers["cache-control"] == "no-cache"
    for path, code in [(http_api.source_path("tpl", 2, "prompt_embeds"), "unknown_source"),
                       (http_api.context_path("tpl", 2, "reference_latents"), "unknown_context"),
                       (http_api.source_path("tpl", 2, "nothing"), "unknown_source")]:
        missing = client.get(path)
        assert missing.status_code == 404 and missing.json()["code"] == code, path
    assert client.get(http_api.source_path("tpl", 1, "reference_latents")).status_code == 404


def test_the_template_image_is_a_source_object_and_a_preamble_bundles_it_when_asked(library):
    client = TestClient(create_api(ServeConfig(store=f"file://{library}", alias_ttl_s=0)))
    entry = client.get(http_api.manifest_path("tpl", 2)).json()["images"][0]
    r = client.get(http_api.source_path("tpl", 2, TEMPLATE_IMAGE))
    assert r.status_code == 200 and r.headers["etag"] == f'"{entry["sha256"]}"' and "key" not in entry
    assert np.array_equal(decode_published(r.content, 16, 16), publish_image(IMAGE)[1])
    assert client.get(http_api.context_path("tpl", 2, TEMPLATE_IMAGE)).json()["code"] == "unknown_context"
    manifest = client.get(http_api.manifest_path("tpl", 2), headers={"Accept-Encoding": "zstd"}).content
    r = client.get(http_api.preamble_path("tpl", 2, source=False, context=False, images=True))
    assert r.url.query == b"context=0&images=1" and r.content == manifest + publish_image(IMAGE)[0]
    (library / layout.image_key("tpl", 2, TEMPLATE_IMAGE)).write_bytes(b"\xff\xd8\xff" + b"\0" * (entry["length"] - 3))
    fresh = TestClient(create_api(ServeConfig(store=f"file://{library}")))  # nothing in its memory tier
    assert fresh.get(http_api.source_path("tpl", 2, TEMPLATE_IMAGE)).json()["code"] == "shard_corrupt"


def test_redirect_mode_sends_a_source_request_to_the_object_with_its_range(library):
    client = TestClient(create_api(ServeConfig(store=f"file://{library}", mode="redirect", cdn_base_url="https://cdn.test/")))
    entry = client.get(http_api.manifest_path("tpl", 2)).json()["source"][0]
    r = client.get(http_api.source_path("tpl", 2, "reference_latents"), follow_redirects=False)
    key = layout.context_key("tpl", 2, "reference_latents")  # where it lives: the server's to know, not the phone's
    assert "key" not in entry and r.status_code == 307 and r.headers["location"] == f"https://cdn.test/{key}"
    assert r.headers["x-sakura-range"] == f"bytes=0-{entry['length'] - 1}"


def test_altered_source_bytes_are_never_served(library):
    key = layout.context_key("tpl", 2, "reference_latents")
    (library / key).write_bytes(b"\0" + (library / key).read_bytes()[1:])
    client = TestClient(create_api(ServeConfig(store=f"file://{library}")))
    r = client.get(http_api.source_path("tpl", 2, "reference_latents"))
    assert r.status_code == 502 and r.json()["code"] == "shard_corrupt"


def test_a_preamble_carries_the_manifest_then_its_objects_in_manifest_order(library, monkeypatch):
    client = TestClient(create_api(ServeConfig(store=f"file://{library}", alias_ttl_s=0)))
    manifest = client.get(http_api.manifest_path("tpl", 2), headers={"Accept-Encoding": "zstd"}).content
    objects = {kind: (library / layout.context_key("tpl", 2, name)).read_bytes()
               for kind, name in (("context", "prompt_embeds"), ("source", "reference_latents"))}
    for source, expected in [(False, [objects["context"]]), (True, [objects["context"], objects["source"]])]:
        r = client.get(http_api.preamble_path("tpl", 2, source=source))
        head = int(r.headers[http_api.PREAMBLE_MANIFEST_LENGTH])
        assert r.status_code == 200 and r.headers[http_api.PREAMBLE_BUNDLED] == "1"
        assert r.content[:head] == manifest and r.content[head:] == b"".join(expected)
        assert "immutable" in r.headers["cache-control"]
    r = client.get(http_api.preamble_path("tpl", 2, source=True, context=False))  # a phone with its own encoder
    assert r.url.query == b"source=1&context=0"
    assert r.content == manifest + objects["source"] and r.headers[http_api.PREAMBLE_BUNDLED] == "1"
    latest = client.get(http_api.preamble_path("tpl", "latest", source=True))
    assert latest.headers["cache-control"] == "no-cache" and latest.headers["x-sakura-version"] == "2"
    monkeypatch.setattr(http_api, "MAX_BUNDLED_BYTES", len(objects["context"]))  # too big to bundle with the source
    r = client.get(http_api.preamble_path("tpl", 2, source=True))
    assert r.headers[http_api.PREAMBLE_BUNDLED] == "0" and r.content == manifest


def test_a_preamble_without_shard_hashes_and_the_hashes_route_that_holds_them(library):
    client = TestClient(create_api(ServeConfig(store=f"file://{library}", alias_ttl_s=0)))
    full = PhoneManifest.from_wire(client.get(http_api.manifest_path("tpl", 2)).content)
    r = client.get(http_api.preamble_path("tpl", 2, source=False, context=False, images=True, hashes=False))
    head = int(r.headers[http_api.PREAMBLE_MANIFEST_LENGTH])
    light = PhoneManifest.from_wire(r.content[:head])
    assert r.url.query == b"context=0&images=1&hashes=0" and not light.hashed and full.hashed
    assert head < len(client.get(http_api.manifest_path("tpl", 2), headers={"Accept-Encoding": "zstd"}).content)
    hashes = client.get(http_api.hashes_path("tpl", 2))
    assert hashes.status_code == 200 and "immutable" in hashes.headers["cache-control"]
    assert light.with_hashes(hashes.content) == full
    again = client.get(http_api.hashes_path("tpl", 2), headers={"If-None-Match": hashes.headers["etag"]})
    assert again.status_code == 304
    assert client.get(http_api.hashes_path("tpl", 9)).status_code == 404


def test_the_smallest_level_alias_serves_the_first_level_a_shard_has_and_names_it(library):
    client = TestClient(create_api(ServeConfig(store=f"file://{library}", alias_ttl_s=0)))
    doc = client.get(http_api.manifest_path("tpl", 2)).json()
    smallest = next(lv["name"] for lv in doc["levels"] if lv["name"] in doc["shards"][0]["levels"])
    r = client.get(http_api.shard_path("tpl", "latest", 0, http_api.SMALLEST_LEVEL))
    assert r.status_code == 200 and r.headers[http_api.SHARD_LEVEL] == smallest and r.headers["x-sakura-version"] == "2"
    assert r.content == client.get(http_api.shard_path("tpl", 2, 0, smallest)).content
    assert client.get(http_api.shard_path("tpl", 2, 0, "~largest")).status_code == 400
