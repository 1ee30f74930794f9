"""Folder listings (what a catalogue page reads) on local directories and S3: SeaweedFS, a real
server that lists by entry name, and moto, which lists in key order as AWS does."""

from __future__ import annotations

import pytest

from sakura.platform.store import ObjectStore, open_store

KEYS = ["t/a/1", "t/a/x/2", "t/a.b/1", "t/a0/1", "t/b/1", "t/b/2", "t/file", "u/c/1"]


@pytest.fixture(params=["file", "s3-seaweedfs", "s3-moto"])
def store(request, tmp_path):
    """Local disk; SeaweedFS (lists by entry name); moto (lists in key order, as AWS)."""
    uris = {"s3-seaweedfs": "seaweed_uri", "s3-moto": "s3_uri"}
    uri = f"file://{tmp_path}/root" if request.param == "file" else request.getfixturevalue(uris[request.param])
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


NAMES = ["face", "face-swap", "face-swap-v2", "face.v2", "face0", "face_x", "facea", "f", "f-", "g"]


@pytest.mark.parametrize("limit", [1, 2, 3, 1000])
def test_paging_folders_by_cursor_returns_each_once_in_folder_order(store, limit):
    """Names that are prefixes of others followed by "-" or ".": S3 lists their common prefixes in
    key order ("face-swap/" before "face/") and SeaweedFS by entry name ("face" first), and each
    starts after a cursor its own way; every page walk must see every folder once, in folder order."""
    for name in NAMES:
        store.put(f"p/{name}/manifest.json", b"x")
    pages, after = [], ""
    while True:
        page = store.list_folders("p/", after=after, limit=limit)
        assert len(page) <= limit
        if not page:
            break
        pages += page
        after = page[-1]
    assert pages == sorted(NAMES, key=lambda n: n + "/")


@pytest.mark.parametrize("cursor", ["f" + "-" * 127, "face-swap" + "-x" * 59, "face" + "-" * 60 + "swap"])
def test_a_cursor_of_many_prefixes_gives_the_page_every_server_agrees_on(store, cursor):
    """Past a few prefixes a listing asks only about those a key shares (found by bisection): on a
    server that lists by entry name those it finds are the page's first folders all the same."""
    for name in NAMES:
        store.put(f"p/{name}/manifest.json", b"x")
    for limit in (1, 3, 1000):
        assert store.list_folders("p/", after=cursor, limit=limit) == ObjectStore.list_folders(
            store, "p/", after=cursor, limit=limit)
