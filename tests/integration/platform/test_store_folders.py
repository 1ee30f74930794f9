"""Folder listings (what a catalogue page reads) on local directories and S3 (a moto server)."""

from __future__ import annotations

import pytest

from sakura.platform.store import ObjectStore, open_store

KEYS = ["t/a/1", "t/a/x/2", "t/a.b/1", "t/a0/1", "t/b/1", "t/b/2", "t/file", "u/c/1"]


@pytest.fixture(params=["file", "s3"])
def store(request, tmp_path):
    uri = f"file://{tmp_path}/root" if request.param == "file" else request.getfixturevalue("s3_uri")
    store = open_store(uri)
    for key in KEYS:
        store.put(key, b"x")
    return store


@pytest.mark.parametrize("after, limit, expected", [
    ("", 10, ["a.b", "a", "a0", "b"]),  # the order of "name/", as S3 lists common prefixes
    ("", 2, ["a.b", "a"]),
    ("a.b", 10, ["a", "a0", "b"]),
    ("a", 10, ["a0", "b"]),
    ("a", 1, ["a0"]),
    ("b", 10, []),
    ("zz", 10, []),
])
def test_folders_come_in_folder_order_after_a_cursor_and_up_to_a_limit(store, after, limit, expected):
    assert store.list_folders("t/", after=after, limit=limit) == expected
    assert ObjectStore.list_folders(store, "t/", after=after, limit=limit) == expected  # the generic one agrees


def test_a_missing_folder_has_no_folders(store):
    assert store.list_folders("nothing/") == []
