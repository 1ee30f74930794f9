"""Choosing a store from a URI: degenerate local URIs are refused, not silently mapped to cwd or /."""

from __future__ import annotations

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
    ("file://localhost{tmp}/lib", "lib"), ("{tmp}/lib", "lib"),
])
def test_local_uris_that_name_a_directory_still_open(uri, expected, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = open_store(uri.format(tmp=tmp_path), retry=None)
    assert store.root == (tmp_path / expected).resolve()
    store.put("a/b.json", b"{}")
    assert Path(tmp_path / expected / "a" / "b.json").read_bytes() == b"{}"
