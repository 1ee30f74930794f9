"""Context objects (e.g. prompt embeddings) are served like shard payloads: immutable, checked
against the manifest's sha256, with ETags and Ranges; unknown names are 404."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from fastapi.testclient import TestClient

from sakura.platform import http_api, layout
from sakura.platform.context import decode_context, encode_context
from sakura.platform.manifest import Manifest
from sakura.serve.api import create_api
from sakura.serve.config import ServeConfig

EMBEDS = np.arange(32 * 6, dtype=np.float32).reshape(32, 6) / 7.0


@pytest.fixture
def library(library_dir):
    """Version 2 of ``tpl`` rewritten to ship a context object (as a pipeline build would)."""
    data, shape, dtype = encode_context(EMBEDS)
    key = layout.context_key("tpl", 2, "prompt_embeds")
    (library_dir / key).write_bytes(data)
    manifest_file = library_dir / layout.manifest_key("tpl", 2)
    doc = json.loads(manifest_file.read_bytes())
    doc["context"] = [{"name": "prompt_embeds", "key": key, "shape": list(shape), "dtype": dtype, "length": len(data),
                       "sha256": hashlib.sha256(data).hexdigest()}]
    manifest_file.write_bytes(Manifest.model_validate(doc).to_bytes())
    return library_dir


def test_a_context_object_is_served_verified_immutable_and_ranged(library):
    client = TestClient(create_api(ServeConfig(store=f"file://{library}", alias_ttl_s=0)))
    entry = client.get(http_api.manifest_path("tpl", 2)).json()["context"][0]
    r = client.get(http_api.context_path("tpl", 2, "prompt_embeds"))
    assert r.status_code == 200 and r.headers["etag"] == f'"{entry["sha256"]}"' and "immutable" in r.headers["cache-control"]
    np.testing.assert_array_equal(decode_context(r.content, tuple(entry["shape"]), entry["dtype"]), EMBEDS)
    assert client.get(http_api.context_path("tpl", 2, "prompt_embeds"), headers={"Range": "bytes=0-9"}).content == r.content[:10]
    assert client.get(http_api.context_path("tpl", 2, "prompt_embeds"), headers={"If-None-Match": r.headers["etag"]}).status_code == 304
    missing = client.get(http_api.context_path("tpl", 2, "pooled"))
    assert missing.status_code == 404 and missing.json()["code"] == "unknown_context"
    assert client.get(http_api.context_path("tpl", 1, "prompt_embeds")).status_code == 404


def test_altered_context_bytes_are_never_served(library):
    key = layout.context_key("tpl", 2, "prompt_embeds")
    (library / key).write_bytes(b"\0" + (library / key).read_bytes()[1:])
    client = TestClient(create_api(ServeConfig(store=f"file://{library}")))
    r = client.get(http_api.context_path("tpl", 2, "prompt_embeds"))
    assert r.status_code == 502 and r.json()["code"] == "shard_corrupt"
