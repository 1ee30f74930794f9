"""Choosing a store from a URI: degenerate local URIs are refused, not silently mapped to cwd or /."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sakura.platform.store import StoreError, open_store


@pytest.mark.parametrize(
    "uri",
    ["file://", "file://localhost", "", "   ", "file:", "file:lib", "file:///", "file://localhost/",
     "file://../../../../../../../../../../.."],
)
def test_uris_that_name_no_directory_or_the_root_are_refused(uri, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError) as info:
        open_store(uri)
    assert "DIR" in str(info.value) or "directory" in str(info.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("uri, expected", [
    ("file://./lib", "lib"), ("./lib", "lib"), ("file://./", "."), ("file://{tmp}/lib", "lib"),
    ("file://localhost{tmp}/lib", "lib"), ("{tmp}/lib", "lib"), ("lib", "lib"),
])
def test_local_uris_that_name_a_directory_still_open(uri, expected, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = open_store(uri.format(tmp=tmp_path), retry=None)
    assert store.root == (tmp_path / expected).resolve()
    store.put("a/b.json", b"{}")
    assert Path(tmp_path / expected / "a" / "b.json").read_bytes() == b"{}"


@pytest.mark.parametrize("uri, says", [
    ("s3:/bucket/lib", "two slashes"),
    (
        "s3://bucket/lib?endpoint_url=http://127.0.0.1:9",
        "unknown query key 'endpoint_url'; an s3:// URI takes ?endpoint=",
    ),
    ("file://./lib?endpoint=x", "takes no query"),
])
def test_store_uri_mistakes_name_the_mistake_and_the_fix(uri, says, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match=re.escape(says)):
        open_store(uri)
    assert list(tmp_path.iterdir()) == []


def test_missing_s3_credentials_say_where_credentials_come_from(monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance role to wait for here
    store = open_store("s3://bucket/lib?endpoint=http://127.0.0.1:9", retry=None)
    with pytest.raises(StoreError, match="no S3 credentials found: set AWS_ACCESS_KEY_ID"):
        list(store.list("templates/"))


def test_the_environment_an_s3_store_needs_elsewhere_is_its_credentials_region_and_endpoint(monkeypatch):
    from sakura.platform.store import store_environment

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("SAKURA_S3_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("HOME_SECRET", "never forwarded")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    assert store_environment("file://./lib") == {}
    env = store_environment("file://./lib", "s3://bucket/lib")
    assert env["AWS_ACCESS_KEY_ID"] == "id" and env["SAKURA_S3_ENDPOINT"] == "http://127.0.0.1:9"
    assert "HOME_SECRET" not in env and "AWS_SESSION_TOKEN" not in env
