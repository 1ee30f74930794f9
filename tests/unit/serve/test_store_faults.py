"""Store faults are not 404s, and answers never name a store path, URI or key (issue 12, items 6
and 16): a missing object a manifest lists is a 503 store fault, a missing store root an outage,
and a version deleted behind the server's back stops being served."""

from __future__ import annotations

import logging
import shutil

from fastapi.testclient import TestClient

from sakura.platform.layout import manifest_key
from sakura.platform.manifest import Manifest
from sakura.serve.api import create_api
from sakura.serve.config import ServeConfig

LEAKS = ("file:", "s3:", "templates/", ".parquet", "manifest.json", "/tmp", "pytest-")


def make_client(root, **config) -> TestClient:
    settings = {"store": f"file://{root}", "alias_ttl_s": 0, "retry_after_s": 7, **config}
    return TestClient(create_api(ServeConfig(**settings)))


def shard_url(version="1", shard="0", level="compact"):
    return f"/v1/templates/tpl/versions/{version}/shards/{shard}/{level}"


def assert_no_leak(response, root) -> None:
    for text in (*LEAKS, str(root)):
        assert text not in response.text, f"{text!r} leaked in {response.text}"


def level_file(root, version: int, level: str):
    manifest = Manifest.from_bytes((root / manifest_key("tpl", version)).read_bytes())
    return root / manifest.level(level).key


def delete_version(root, version: int) -> None:
    """What gc does: the manifest first (the version becomes invisible), then the files."""
    directory = root / "templates/tpl/versions" / str(version)
    (directory / "manifest.json").unlink()
    shutil.rmtree(directory)  # the files, and (unlike gc) the claim's and mark's logs too


def test_a_level_file_missing_behind_the_manifest_is_a_503_store_fault(library_dir, caplog):
    client = make_client(library_dir)
    level_file(library_dir, 1, "compact").unlink()
    with caplog.at_level(logging.ERROR, logger="sakura.serve"):
        r = client.get(shard_url())
    assert r.status_code == 503 and r.json()["code"] == "store_fault" and r.headers["retry-after"] == "7"
    assert_no_leak(r, library_dir)
    assert "compact.parquet" in caplog.text  # the operator finds the detail in the log
    assert client.get(shard_url(level="medium")).status_code == 200


def test_a_store_root_moved_away_is_an_outage_and_is_never_created(library_dir):
    client = make_client(library_dir)
    assert client.get("/v1/templates/tpl/versions/1/manifest").status_code == 200  # cached from now on
    moved = library_dir.rename(library_dir.with_name("moved"))
    for url in ("/v1/templates", "/v1/templates/tpl/versions", "/v1/templates/nope/versions",
                "/v1/templates/tpl/versions/1/manifest", "/v1/templates/tpl/versions/2/manifest",
                "/v1/templates/tpl/versions/latest/manifest", shard_url(), shard_url(version="2")):
        r = client.get(url)
        assert r.status_code == 503 and r.json()["code"] == "store_unavailable", (url, r.text)
        assert r.headers["retry-after"] == "7"
        assert_no_leak(r, library_dir)
    assert not library_dir.exists()  # the server never creates the store's root
    moved.rename(library_dir)
    assert client.get("/v1/templates").json()["templates"][0]["id"] == "tpl"
    assert client.get(shard_url()).status_code == 200


def test_an_empty_existing_store_is_an_empty_catalogue(tmp_path):
    assert make_client(tmp_path).get("/v1/templates").json() == {"templates": [], "next_cursor": None}
    assert make_client(tmp_path).get("/v1/templates/tpl/versions").status_code == 404


def test_no_error_answer_names_a_store_path_uri_or_key(library_dir, tmp_path):
    original = Manifest.from_bytes((library_dir / manifest_key("tpl", 1)).read_bytes())
    elsewhere = tmp_path / "cold-tier"
    elsewhere.mkdir()

    def publish_copy(version: int, **level_update) -> None:
        levels = [lv.model_copy(update=level_update) for lv in original.levels]
        path = library_dir / manifest_key("tpl", version)
        path.parent.mkdir(parents=True)
        path.write_bytes(original.model_copy(update={"version": version, "levels": levels}).to_bytes())

    publish_copy(3, key="templates/../../../etc/passwd")  # a key the store refuses
    publish_copy(4, store=elsewhere.as_uri())  # a tier whose file is missing
    (library_dir / manifest_key("tpl", 2)).write_bytes(b'{"schema_version": 1, "oops"')
    max((library_dir / "templates/tpl/aliases/latest").glob("*.json")).write_bytes(b'{"vers')
    client = make_client(library_dir)
    for url, status in [(shard_url(version="3"), 502), (shard_url(version="4"), 503),
                        ("/v1/templates/tpl/versions/2/manifest", 502),
                        ("/v1/templates/tpl/versions/latest/manifest", 502)]:
        r = client.get(url)
        assert r.status_code == status, (url, r.text)
        assert_no_leak(r, library_dir)
        assert str(elsewhere) not in r.text


def test_served_manifests_carry_no_tier_uri(library_dir, tmp_path):
    manifest = Manifest.from_bytes((library_dir / manifest_key("tpl", 1)).read_bytes())
    tiered = manifest.model_copy(update={"version": 3, "levels": [
        lv.model_copy(update={"store": library_dir.as_uri()}) for lv in manifest.levels]})
    path = library_dir / manifest_key("tpl", 3)
    path.parent.mkdir(parents=True)
    path.write_bytes(tiered.to_bytes())
    client = make_client(library_dir)
    r = client.get("/v1/templates/tpl/versions/3/manifest")
    assert r.status_code == 200 and "file:" not in r.text and str(library_dir) not in r.text
    assert client.get(shard_url(version="3")).status_code == 200  # the server still reads the tier


def test_a_deleted_version_stops_being_served(library_dir):
    client = make_client(library_dir)
    assert "immutable" in client.get("/v1/templates/tpl/versions/1/manifest").headers["cache-control"]
    assert client.get(shard_url()).status_code == 200
    delete_version(library_dir, 1)
    for url in ("/v1/templates/tpl/versions/1/manifest", shard_url(), shard_url(level="full")):
        r = client.get(url)
        assert r.status_code == 404 and r.json()["code"] == "not_found", (url, r.text)
        assert "immutable" not in r.headers["cache-control"]
    assert client.get("/v1/templates/tpl/versions/2/manifest").status_code == 200


def test_a_shard_of_a_deleted_version_evicts_its_cached_manifest(library_dir):
    client = make_client(library_dir, alias_ttl_s=3600)
    assert client.get("/v1/templates/tpl/versions/1/manifest").status_code == 200
    delete_version(library_dir, 1)
    # Within alias_ttl_s the cached manifest is not checked again (no store request per hit) ...
    assert client.get("/v1/templates/tpl/versions/1/manifest").status_code == 200
    # ... but a shard read that finds its file gone checks the manifest: the version was deleted.
    r = client.get(shard_url())
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    assert client.get("/v1/templates/tpl/versions/1/manifest").status_code == 404
