"""Store faults on S3 (issue 12, items 6 and 16), in-process against a real S3 server (moto): an
object the manifest lists but the bucket lacks is a 503, a missing bucket an outage, a deleted
version a 404; no answer names the bucket, a URI or a key."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from sakura.serve.api import create_api
from sakura.serve.config import ServeConfig
from tests.helpers import make_library


@pytest.fixture(scope="module")
def source_bucket(s3_server):
    bucket = s3_server.new_bucket()
    make_library(f"s3://{bucket}/lib?endpoint={s3_server.endpoint}", ["skimage:brick", "skimage:grass"])
    return bucket


@pytest.fixture
def bucket(s3_server, source_bucket):
    """A private copy of the library's bucket, free to break."""
    client, copy = s3_server.client(), s3_server.new_bucket()
    for obj in client.list_objects_v2(Bucket=source_bucket)["Contents"]:
        client.copy_object(Bucket=copy, Key=obj["Key"], CopySource={"Bucket": source_bucket, "Key": obj["Key"]})
    return copy


def make_client(s3_server, bucket) -> TestClient:
    store = f"s3://{bucket}/lib?endpoint={s3_server.endpoint}"
    return TestClient(create_api(ServeConfig(store=store, alias_ttl_s=0, retry_after_s=5)))


def shard_url(version="1", level="compact"):
    return f"/v1/templates/tpl/versions/{version}/shards/0/{level}"


def assert_no_leak(response, bucket) -> None:
    for text in ("s3:", bucket, "lib/", "templates/", ".parquet", "127.0.0.1"):
        assert text not in response.text, f"{text!r} leaked in {response.text}"


def test_an_object_missing_behind_the_manifest_is_a_503_store_fault(s3_server, bucket):
    client = make_client(s3_server, bucket)
    s3_server.client().delete_object(Bucket=bucket, Key="lib/templates/tpl/versions/1/compact.parquet")
    r = client.get(shard_url())
    assert r.status_code == 503 and r.json()["code"] == "store_fault" and r.headers["retry-after"] == "5"
    assert_no_leak(r, bucket)
    assert client.get(shard_url(level="medium")).status_code == 200


def test_a_missing_bucket_is_an_outage(s3_server, bucket):
    client = make_client(s3_server, bucket)
    assert client.get("/v1/templates/tpl/versions/1/manifest").status_code == 200
    s3 = s3_server.client()
    for obj in s3.list_objects_v2(Bucket=bucket)["Contents"]:
        s3.delete_object(Bucket=bucket, Key=obj["Key"])
    s3.delete_bucket(Bucket=bucket)
    for url in ("/v1/templates", "/v1/templates/tpl/versions", "/v1/templates/tpl/versions/1/manifest",
                "/v1/templates/tpl/versions/latest/manifest", shard_url()):
        r = client.get(url)
        assert r.status_code == 503 and r.json()["code"] == "store_unavailable", (url, r.text)
        assert_no_leak(r, bucket)


def test_a_deleted_version_stops_being_served(s3_server, bucket):
    client = make_client(s3_server, bucket)
    assert client.get("/v1/templates/tpl/versions/1/manifest").status_code == 200
    s3 = s3_server.client()
    prefix = "lib/templates/tpl/versions/1/"
    s3.delete_object(Bucket=bucket, Key=prefix + "manifest.json")  # what gc does: invisible first
    for obj in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]:
        s3.delete_object(Bucket=bucket, Key=obj["Key"])
    for url in ("/v1/templates/tpl/versions/1/manifest", shard_url()):
        r = client.get(url)
        assert r.status_code == 404 and r.json()["code"] == "not_found", (url, r.text)
    assert client.get("/v1/templates/tpl/versions/2/manifest").status_code == 200


def test_an_outage_keeps_serving_cached_versions(s3_server, bucket):
    client = make_client(s3_server, bucket)  # alias_ttl_s=0: every request revalidates its manifest
    assert client.get(shard_url()).status_code == 200
    s3_server.stop()
    try:  # the store cannot say the version is gone, so what is cached is still served
        assert client.get("/v1/templates/tpl/versions/1/manifest").status_code == 200
        assert client.get(shard_url()).status_code == 200
        r = client.get(shard_url(level="medium"))
        assert r.status_code == 503 and r.json()["code"] == "store_unavailable" and r.headers["retry-after"] == "5"
        assert_no_leak(r, bucket)
    finally:
        s3_server.start()
    assert client.get(shard_url(level="medium")).status_code == 200
