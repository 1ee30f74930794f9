"""The shard service on a real Ray Serve instance, reading a library from an S3 server: moto here,
because the outage test stops the server under the running service and starts it again with its
data (moto keeps its backend in process; the build, folder, contract, race and edge-service
suites run on SeaweedFS)."""

from __future__ import annotations

import hashlib
import json
import time

import httpx
import pytest

from sakura.platform.library import TemplateLibrary
from sakura.platform.manifest import Manifest
from sakura.platform.store import open_store
from tests.helpers import make_library
from tests.integration.conftest import serve_apps

ADMIN = "integration-admin-token"


@pytest.fixture(scope="module")
def library(s3_server):
    uri = f"s3://{s3_server.new_bucket()}/lib?endpoint={s3_server.endpoint}"
    make_library(uri, ["skimage:brick", "skimage:grass"], steps=2)
    return uri


def stored_manifest(library: str, version: int) -> Manifest:
    return TemplateLibrary(open_store(library)).manifest("tpl", version)


@pytest.fixture(scope="module")
def service(ray_cluster, library):
    apps = {"/": {"store": library, "admin_token": ADMIN, "alias_ttl_s": 0.0, "retry_after_s": 3},
            "/redirect": {"store": library, "mode": "redirect"}}
    with serve_apps(apps) as base, httpx.Client(base_url=base, timeout=30) as client:
        yield client


def shard_url(version="1", shard=0, level="medium", prefix=""):
    return f"{prefix}/v1/templates/tpl/versions/{version}/shards/{shard}/{level}"


def test_every_endpoint(service):
    assert service.get("/healthz").json() == {"status": "ok"}
    assert service.get("/v1/templates").json()["templates"][0]["id"] == "tpl"
    assert service.get("/v1/templates/tpl/versions").json()["versions"] == [1, 2]
    manifest = service.get("/v1/templates/tpl/versions/1/manifest")
    assert manifest.status_code == 200 and "immutable" in manifest.headers["cache-control"]
    assert service.get("/v1/templates/tpl/versions/latest/manifest").json()["version"] == 2
    loc = manifest.json()["shards"][0]["levels"]["medium"]
    r = service.get(shard_url())
    assert r.status_code == 200 and hashlib.sha256(r.content).hexdigest() == loc["sha256"]
    assert service.get(shard_url(), headers={"If-None-Match": r.headers["etag"]}).status_code == 304
    assert service.get(shard_url(), headers={"Range": "bytes=0-99"}).status_code == 206
    assert service.get(shard_url(), headers={"Range": f"bytes={len(r.content) + 10}-"}).status_code == 416


def test_alias_update_with_and_without_token(service):
    url = "/v1/templates/tpl/aliases/stable"
    assert service.put(url, json={"version": 1}).status_code == 401
    assert service.put(url, json={"version": 1}, headers={"Authorization": "Bearer nope"}).status_code == 403
    ok = service.put(url, json={"version": 1}, headers={"Authorization": f"Bearer {ADMIN}"})
    assert ok.status_code == 200
    assert service.get("/v1/templates/tpl/versions/stable/manifest").json()["version"] == 1


@pytest.mark.parametrize("url, status", [
    ("/v1/templates/..%2e/versions/1/manifest", 400),
    ("/v1/templates/tpl/versions/1/shards/-1/medium", 400),
    ("/v1/templates/tpl/versions/1/shards/123456789012345678901234567890/medium", 400),
    ("/v1/templates/tpl/versions/1/shards/0/ultra", 404),
    ("/v1/templates/ghost/versions/1/manifest", 404),
])
def test_hostile_input_gets_4xx_and_leaves_the_service_healthy(service, url, status):
    r = service.get(url)
    assert r.status_code == status and "code" in r.json()
    assert service.get("/healthz").status_code == 200


def test_oversized_headers_are_refused(service):
    try:
        r = service.get("/healthz", headers={"X-Junk": "x" * 200_000})
        assert r.status_code == 431
    except httpx.HTTPError:
        pass  # a proxy closing the connection is a refusal too
    assert service.get("/healthz").status_code == 200


def test_store_outage_serves_cached_shards_and_recovers(service, s3_server):
    cached = shard_url(shard=1, level="compact")
    assert service.get(cached).status_code == 200
    s3_server.stop()
    try:
        assert service.get(cached).status_code == 200
        r = service.get(shard_url(shard=2, level="compact"))
        assert r.status_code == 503 and r.json()["code"] == "store_unavailable" and r.headers["retry-after"] == "3"
    finally:
        s3_server.start()
    assert service.get(shard_url(shard=2, level="compact")).status_code == 200


def test_altered_bytes_in_the_store_are_never_served(service, s3_server, library):
    stored = stored_manifest(library, 2)  # phones never see where bytes live
    bucket = library.split("/")[2]
    client = s3_server.client()
    key = f"lib/{stored.level('full').key}"
    data = bytearray(client.get_object(Bucket=bucket, Key=key)["Body"].read())
    data[stored.shard(3).levels["full"].offset + 7] ^= 0x01
    client.put_object(Bucket=bucket, Key=key, Body=bytes(data))
    r = service.get(shard_url(version="2", shard=3, level="full"))
    assert r.status_code == 502 and r.json()["code"] == "shard_corrupt"


def test_redirect_mode_sends_clients_to_the_store_with_a_byte_range(service, library):
    loc = stored_manifest(library, 1).shard(0).levels["full"]
    assert service.get("/redirect/v1/templates/tpl/versions/1/manifest").json()["shards"][0]["levels"]["full"] == {
        "length": loc.length, "sha256": loc.sha256}
    r = service.get(shard_url(level="full", prefix="/redirect"), follow_redirects=False)
    assert r.status_code == 307 and r.headers["x-sakura-range"] == f"bytes={loc.offset}-{loc.offset + loc.length - 1}"
    direct = httpx.get(r.headers["location"], headers={"Range": r.headers["x-sakura-range"]}, timeout=30)
    assert direct.status_code == 206 and hashlib.sha256(direct.content).hexdigest() == loc.sha256


def test_each_request_leaves_one_json_access_line_in_the_replica_log(service):
    from pathlib import Path

    import ray

    from sakura.serve.access import ACCESS_FIELDS

    path = "/v1/templates/tpl/versions/1/manifest"
    assert service.get(path).status_code == 200
    logs = Path(ray._private.worker._global_node.get_logs_dir_path()) / "serve"
    deadline, found = time.time() + 20, []
    while not found and time.time() < deadline:
        for log_file in logs.glob("replica_*.log"):
            for line in log_file.read_text(errors="replace").splitlines():
                if '"http_path"' in line:
                    record = json.loads(line)  # every line of the file is one JSON object
                    if record["http_path"] == path and record.get("request_id"):
                        found.append(record)
        time.sleep(0.2)
    assert found, f"no JSON access line for {path} under {logs}"
    record = found[-1]
    assert set(ACCESS_FIELDS) <= set(record) and record["http_method"] == "GET" and record["http_status"] == 200
    assert record["response_bytes"] > 0 and record["api_route"].endswith("/manifest") and record["latency_ms"] >= 0
