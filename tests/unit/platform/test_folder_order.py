"""Folder order across servers that list differently (``sakura.platform.store.base``)."""

from __future__ import annotations

import math

import pytest

from sakura.platform.store.base import ObjectStore, cursor_prefixes, folder_after, listing_complete
from sakura.platform.store.s3 import S3Store


def test_a_cursors_prefixes_before_a_dash_or_dot_come_after_it_in_folder_order():
    assert cursor_prefixes("face-swap.v2") == ["face", "face-swap"]
    assert cursor_prefixes("face_x") == [] and cursor_prefixes("") == []
    assert all(folder_after(p, "face-swap.v2") for p in cursor_prefixes("face-swap.v2"))


def test_a_listing_is_complete_once_it_read_past_the_extensions_of_every_chosen_name():
    assert not listing_complete(["a", "b"], "b")  # "b-x" may follow "b" and sort before it
    assert not listing_complete(["a", "b"], "b.v2")
    assert listing_complete(["a", "b"], "b0")  # past every "b-"/"b." name
    assert listing_complete(["a.b", "a"], "a0")


# -- what a cursor costs on S3 ----------------------------------------------------------------------
NAMES = ["a", "a-b", "a-b-c", "a.b", "b", "face-swap.v2"]


@pytest.fixture
def s3():
    """An S3 store on moto's in-process S3 (key order, as AWS lists), its requests counted."""
    boto3 = pytest.importorskip("boto3")
    moto = pytest.importorskip("moto")
    with moto.mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="lib")
        store = S3Store("s3://lib/root", client=client)
        for name in NAMES:
            store.put(f"templates/{name}/manifest.json", b"{}")
        store.requests = []  # type: ignore[attr-defined]
        real = client.list_objects_v2
        client.list_objects_v2 = lambda **kw: store.requests.append(kw) or real(**kw)  # type: ignore[attr-defined]
        yield store


@pytest.mark.parametrize("cursor", [
    "a" + "-" * 127,  # 127 prefixes; "a" and "a-" begin keys
    "a-b-c" + "-x" * 61,  # 63 prefixes; "a", "a-b" and "a-b-c" are folders, and after it
    "z" + ".z" * 63,  # 63 prefixes, none beginning a key
    "A=" + "-" * 126,
], ids=["dashes", "deep-folders", "nothing-shared", "foreign"])
def test_a_cursor_costs_what_the_stores_names_allow_not_what_its_length_asks(s3, cursor):
    """One request per prefix of the cursor a key shares, a bisection's worth more: never one per
    prefix (up to 127 for a cursor of 128 characters) whatever the cursor."""
    assert len(cursor_prefixes(cursor)) >= 63
    page = s3.list_folders("templates/", after=cursor, limit=10)
    assert page == ObjectStore.list_folders(s3, "templates/", after=cursor, limit=10)  # the same page
    prefixes = cursor_prefixes(cursor)
    shared = sum(any(f"{n}/manifest.json".startswith(p) for n in NAMES) for p in prefixes)
    listings = 2  # the page itself: its first listing, and one more at most to see past "a-b-c-x..."
    assert len(s3.requests) <= 1 + math.ceil(math.log2(len(prefixes))) + shared + listings, len(s3.requests)


@pytest.mark.parametrize("limit", [1, 2, 1000])
def test_a_walk_by_the_cursors_a_listing_hands_out_sees_every_folder_once(s3, limit):
    for name in ("a-b-c-d-e-f", "a-b-c-d-e-f-g.h", "a-b-c-d-e"):  # more prefixes than are asked at once
        s3.put(f"templates/{name}/manifest.json", b"{}")
    pages, after = [], ""
    while page := s3.list_folders("templates/", after=after, limit=limit):
        pages += page
        after = page[-1]
    assert pages == sorted([*NAMES, "a-b-c-d-e-f", "a-b-c-d-e-f-g.h", "a-b-c-d-e"], key=lambda n: n + "/")
