"""The HTTP API in-process (FastAPI TestClient on a local library): every endpoint and 4xx path."""

from __future__ import annotations

import hashlib

import pytest
from fastapi.testclient import TestClient

from sakura.platform import http_api
from sakura.platform.layout import manifest_key
from sakura.platform.manifest import Manifest, PhoneManifest
from sakura.serve.api import create_api
from sakura.serve.config import ServeConfig
from sakura.serve.metrics import UNMATCHED_ROUTE
from sakura.serve.ranges import parse_range

ADMIN = "s3cret-admin"


@pytest.fixture(scope="module")
def library_uri(built_library):
    return f"file://{built_library}"


@pytest.fixture
def client(library_uri):
    return TestClient(create_api(ServeConfig(store=library_uri, admin_token=ADMIN, alias_ttl_s=0)))


def shard_url(version="1", shard="0", level="medium"):
    return f"/v1/templates/tpl/versions/{version}/shards/{shard}/{level}"


def test_health_catalogue_versions_and_metrics(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    catalogue = client.get("/v1/templates").json()
    assert catalogue == {"templates": [{"id": "tpl", "aliases": {"latest": 2}}], "next_cursor": None}
    assert client.get("/v1/templates/tpl/versions").json()["versions"] == [1, 2]
    client.get(shard_url())
    client.get(shard_url())
    metrics = client.app.state.metrics
    assert metrics.value("sakura_requests", route=http_api.SHARD, status="200") == 2
    assert metrics.value("sakura_requests") == 5
    assert metrics.value("sakura_request_seconds_count", route=http_api.CATALOGUE) == 1
    assert metrics.value("sakura_shard_tier_hits", tier="store") == 1  # the second read is cached
    assert metrics.value("sakura_shard_tier_hits", tier="memory") == 1


def test_unmatched_paths_share_one_route_label_and_metrics_is_not_a_route(client):
    for path in ("/nope", "/v1/templates/tpl/versions/1/nothing/here", "/metrics"):
        assert client.get(path).status_code == 404
    metrics = client.app.state.metrics
    assert metrics.value("sakura_requests", route=UNMATCHED_ROUTE, status="404") == 3
    assert {dict(key)["route"] for (name, key) in metrics.recorder.totals if name == "sakura_requests"} == {
        UNMATCHED_ROUTE}


def test_manifest_numeric_is_immutable_and_alias_is_not(client):
    numeric = client.get("/v1/templates/tpl/versions/1/manifest")
    assert numeric.status_code == 200 and numeric.json()["version"] == 1
    assert "immutable" in numeric.headers["cache-control"]
    assert numeric.headers["etag"] == f'"{hashlib.sha256(numeric.content).hexdigest()}"'
    cached = client.get("/v1/templates/tpl/versions/1/manifest", headers={"If-None-Match": numeric.headers["etag"]})
    assert cached.status_code == 304
    alias = client.get("/v1/templates/tpl/versions/latest/manifest")
    assert alias.json()["version"] == 2 and alias.headers["cache-control"] == "no-cache"
    assert alias.headers["x-sakura-version"] == "2"


def test_shard_bytes_etag_304_and_ranges(client):
    manifest = client.get("/v1/templates/tpl/versions/1/manifest").json()
    loc = manifest["shards"][0]["levels"]["medium"]
    r = client.get(shard_url())
    assert r.status_code == 200 and len(r.content) == loc["length"]
    assert hashlib.sha256(r.content).hexdigest() == loc["sha256"] and r.headers["etag"] == f'"{loc["sha256"]}"'
    assert r.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert client.get(shard_url(), headers={"If-None-Match": r.headers["etag"]}).status_code == 304
    part = client.get(shard_url(), headers={"Range": "bytes=10-19"})
    assert part.status_code == 206 and part.content == r.content[10:20]
    assert part.headers["content-range"] == f"bytes 10-19/{len(r.content)}"
    assert client.get(shard_url(), headers={"Range": "bytes=-5"}).content == r.content[-5:]
    assert client.get(shard_url(), headers={"Range": "bytes=100-"}).content == r.content[100:]
    bad = client.get(shard_url(), headers={"Range": f"bytes={len(r.content)}-"})
    assert bad.status_code == 416 and bad.headers["content-range"] == f"bytes */{len(r.content)}"
    assert client.get(shard_url(version="latest")).headers["cache-control"] == "no-cache"


@pytest.mark.parametrize("url, status, code", [
    ("/v1/templates/nope/versions", 404, "unknown_template"),
    ("/v1/templates/nope/versions/latest/manifest", 404, "unknown_template"),
    ("/v1/templates/NOPE!/versions", 400, "invalid_template_id"),
    ("/v1/templates/..%2F..%2Fetc/versions/1/manifest", 404, "not_found"),
    ("/v1/templates/..%2e/versions/1/manifest", 400, "invalid_template_id"),
    ("/v1/templates/tpl/versions/9/manifest", 404, "not_found"),
    ("/v1/templates/tpl/versions/no_such_alias/manifest", 404, "not_found"),
    ("/v1/templates/tpl/versions/-1/manifest", 400, "invalid_request"),
    ("/v1/templates/tpl/versions/99999999999999999999/manifest", 400, "invalid_request"),
    # Numbers from URLs are canonical ASCII decimal only (issue 12, item 7).
    ("/v1/templates/tpl/versions/%C2%B2/manifest", 400, "invalid_request"),
    ("/v1/templates/tpl/versions/%D9%A1/manifest", 400, "invalid_request"),
    ("/v1/templates/tpl/versions/01/manifest", 400, "invalid_request"),
    (shard_url(version="%D9%A1"), 400, "invalid_request"),
    (shard_url(shard="%D9%A1"), 400, "invalid_shard"),
    (shard_url(shard="%C2%B2"), 400, "invalid_shard"),
    (shard_url(shard="01"), 400, "invalid_shard"),
    (shard_url(shard="-1"), 400, "invalid_shard"),
    (shard_url(shard="99999999999999999999999"), 400, "invalid_shard"),
    (shard_url(shard="abc"), 400, "invalid_shard"),
    (shard_url(shard="500"), 404, "unknown_shard"),
    (shard_url(level="ultra"), 404, "unknown_level"),
    (shard_url(level="../full"), 404, "not_found"),
    (shard_url(level="FULL"), 400, "invalid_request"),
    ("/v2/anything", 404, "not_found"),
])
def test_bad_requests_get_typed_errors(client, url, status, code):
    r = client.get(url)
    assert r.status_code == status, r.text
    assert r.json()["code"] == code


def test_an_unknown_template_is_named_with_the_closest_published_ids(client):
    for url in ("/v1/templates/tqp/versions", "/v1/templates/tqp/versions/latest/manifest"):
        r = client.get(url)
        assert r.status_code == 404 and r.json()["code"] == "unknown_template", r.text
        assert r.json()["message"] == "unknown template 'tqp'; did you mean 'tpl'?"
    far = client.get("/v1/templates/zzzzzz/versions/latest/manifest").json()
    assert far["message"] == "unknown template 'zzzzzz'"


@pytest.mark.parametrize("header, span", [
    ("bytes=1-5", (1, 6)),
    ("bytes=\u0661-\u0665", None),  # Arabic-Indic digits: int() reads them, the header grammar does not
    ("bytes=\uff11-", None),  # fullwidth 1
    ("bytes=-\u0663", None),
])
def test_range_headers_take_ascii_digits_only(header, span):
    assert parse_range(header, 100) == span


def test_alias_update_needs_the_admin_token(client):
    url = "/v1/templates/tpl/aliases/stable"
    assert client.put(url, json={"version": 1}).status_code == 401
    assert client.put(url, json={"version": 1}, headers={"Authorization": "Bearer wrong"}).status_code == 403
    auth = {"Authorization": f"Bearer {ADMIN}"}
    assert client.put(url, json={"version": 1}, headers=auth).json() == {"id": "tpl", "alias": "stable", "version": 1}
    assert client.get("/v1/templates/tpl/versions/stable/manifest").json()["version"] == 1
    assert client.put(url, json={"version": 7}, headers=auth).status_code == 404
    assert client.put(url, content=b"not json", headers=auth).json()["code"] == "invalid_body"
    assert client.put("/v1/templates/tpl/aliases/Bad Alias", json={"version": 1}, headers=auth).status_code == 400


def test_without_an_admin_token_alias_updates_are_disabled(library_uri):
    client = TestClient(create_api(ServeConfig(store=library_uri)))
    r = client.put("/v1/templates/tpl/aliases/stable", json={"version": 1}, headers={"Authorization": "Bearer x"})
    assert r.status_code == 403 and r.json()["code"] == "admin_disabled"


def test_api_keys_guard_reads_when_configured(library_uri):
    client = TestClient(create_api(ServeConfig(store=library_uri, api_keys=("k1", "k2"))))
    assert client.get("/v1/templates").status_code == 401
    assert client.get("/v1/templates", headers={"X-API-Key": "nope"}).status_code == 403
    assert client.get("/v1/templates", headers={"X-API-Key": "k2"}).status_code == 200
    assert client.get(shard_url(), headers={"Authorization": "Bearer k1"}).status_code == 200
    assert client.get("/healthz").status_code == 200


def test_altered_bytes_are_never_served(tmp_path, library_uri):
    import shutil

    copy = tmp_path / "lib"
    shutil.copytree(library_uri.removeprefix("file://"), copy)
    client = TestClient(create_api(ServeConfig(store=f"file://{copy}")))
    stored = Manifest.from_bytes((copy / manifest_key("tpl", 1)).read_bytes())  # phones never see keys
    path = copy / stored.level("compact").key
    data = bytearray(path.read_bytes())
    data[stored.shard(1).levels["compact"].offset + 5] ^= 0xFF
    path.write_bytes(bytes(data))
    r = client.get(shard_url(shard="1", level="compact"))
    assert r.status_code == 502 and r.json()["code"] == "shard_corrupt"
    assert client.get(shard_url(shard="0", level="compact")).status_code == 200
    assert client.app.state.metrics.value("sakura_corrupt_shards") == 1


def test_oversized_headers_get_431(client):
    r = client.get("/healthz", headers={"X-Junk": "x" * 40_000})
    assert r.status_code == 431 and r.json()["code"] == "headers_too_large"
    assert client.get("/healthz").status_code == 200


def test_phones_get_a_manifest_without_store_uris_keys_or_row_groups(tmp_path, library_dir):
    """A level kept in another tier (its own store URI in the stored manifest) is served from there,
    and no manifest a phone gets, JSON or zstd, names where any bytes live."""
    stored_path = library_dir / manifest_key("tpl", 1)
    stored = Manifest.from_bytes(stored_path.read_bytes())
    tier = tmp_path / "cold-tier"
    full = stored.level("full")
    (tier / full.key).parent.mkdir(parents=True)
    (library_dir / full.key).rename(tier / full.key)
    levels = [lv.model_copy(update={"store": f"file://{tier}"}) if lv.name == "full" else lv for lv in stored.levels]
    stored_path.write_bytes(stored.model_copy(update={"levels": levels}).to_bytes())
    client = TestClient(create_api(ServeConfig(store=f"file://{library_dir}")))
    for version in client.get("/v1/templates/tpl/versions").json()["versions"]:
        url = f"/v1/templates/tpl/versions/{version}/manifest"
        plain, packed = client.get(url), client.get(url, headers={"Accept-Encoding": "gzip, zstd;q=0.9"})
        assert packed.headers["content-encoding"] == "zstd" and "content-encoding" not in plain.headers
        assert PhoneManifest.from_wire(packed.content) == PhoneManifest.from_wire(plain.content)
        assert len(packed.content) < len(plain.content) and packed.headers["etag"] != plain.headers["etag"]
        for forbidden in ("file://", "s3://", '"key"', "row_group", "importance"):
            assert forbidden not in plain.text, forbidden
    assert client.get(shard_url(shard="0", level="full")).status_code == 200  # from the tier
    assert "content-encoding" not in client.get(url, headers={"Accept-Encoding": "zstd;q=0"}).headers


def test_an_unexpected_error_is_a_500_that_names_nothing_internal_and_is_counted(library_uri, monkeypatch):
    from sakura.serve.reader import ShardReader

    def broken(*_args, **_kwargs):
        raise RuntimeError("/srv/secret/path exploded")

    monkeypatch.setattr(ShardReader, "read", broken)
    app = create_api(ServeConfig(store=library_uri))
    with TestClient(app, raise_server_exceptions=False) as client:
        r = client.get(shard_url())
    assert r.status_code == 500 and r.json()["code"] == "internal" and "secret" not in r.text
    assert app.state.metrics.value("sakura_requests", route=http_api.SHARD, status="500") == 1
