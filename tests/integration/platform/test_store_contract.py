"""The same contract for every store: local directories, and S3 on a real server (SeaweedFS)
and on moto's."""

from __future__ import annotations

import threading

import pytest

from sakura.platform.store import (
    AlreadyExists,
    InvalidKey,
    NotFound,
    StoreError,
    TransientStoreError,
    open_store,
)


@pytest.fixture(params=["file", "s3-seaweedfs", "s3-moto"])
def store(request, tmp_path):
    if request.param == "file":
        return open_store(f"file://{tmp_path}/root")
    return open_store(request.getfixturevalue("seaweed_uri" if request.param == "s3-seaweedfs" else "s3_uri"))


def test_put_get_range_head_and_overwrite(store):
    store.put("a/b.bin", b"0123456789")
    assert store.get("a/b.bin") == b"0123456789"
    assert store.get("a/b.bin", (2, 5)) == b"234"
    assert store.get("a/b.bin", (4, 4)) == b""
    info = store.head("a/b.bin")
    assert info is not None and info.size == 10
    store.put("a/b.bin", b"new")
    assert store.get("a/b.bin") == b"new" and store.head("a/b.bin").etag != info.etag
    assert store.head("a/missing") is None
    with pytest.raises(NotFound):
        store.get("a/missing")


def test_create_only(store):
    store.put_if_absent("m.json", b"v1")
    with pytest.raises(AlreadyExists):
        store.put_if_absent("m.json", b"v2")
    assert store.get("m.json") == b"v1"
    store.delete("m.json")
    store.put_if_absent("m.json", b"v3")  # a deleted key can be created again
    assert store.get("m.json") == b"v3"


def test_list_is_prefix_filtered_and_ordered_and_delete_is_idempotent(store):
    for key in ["t/x/2", "t/x/1", "t/y/1", "u/1"]:
        store.put(key, key.encode())
    assert [o.key for o in store.list("t/x/")] == ["t/x/1", "t/x/2"]
    assert [o.key for o in store.list("t/")] == ["t/x/1", "t/x/2", "t/y/1"]
    store.delete("t/x/1")
    store.delete("t/x/1")
    assert [o.key for o in store.list("t/")] == ["t/x/2", "t/y/1"]


@pytest.mark.parametrize("key", ["../escape", "/abs", "a//b", "a/../b", "", "a/.hidden", "a b", "x" * 2000])
def test_keys_that_could_escape_are_refused(store, key):
    with pytest.raises(InvalidKey):
        store.put(key, b"x")
    with pytest.raises(InvalidKey):
        store.get(key)


def test_racing_create_only_writes_have_one_winner(store):
    """What the library rests on (docs/architecture.md, "What the library needs from a store"):
    of writers racing to create one key, exactly one succeeds and its bytes are what is stored."""
    for trial in range(8):
        key, barrier, won = f"race/{trial}.json", threading.Barrier(4), []

        def create(writer: int, key: str = key, barrier: threading.Barrier = barrier, won: list = won) -> None:
            barrier.wait(timeout=30)
            try:
                store.put_if_absent(key, f"writer {writer}".encode())
                won.append(writer)
            except AlreadyExists:
                pass

        threads = [threading.Thread(target=create, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert len(won) == 1 and store.get(key) == f"writer {won[0]}".encode(), (trial, won)


def test_unreachable_s3_is_a_transient_error_and_unknown_schemes_are_refused():
    dead = open_store("s3://bucket/x?endpoint=http://127.0.0.1:9", retry=None)
    with pytest.raises(TransientStoreError):
        dead.check_reachable()
    with pytest.raises(StoreError, match="unsupported store scheme"):
        open_store("gopher://x/y")


def test_missing_bucket_is_a_permanent_error(s3_server):
    store = open_store(f"s3://no-such-bucket-here/x?endpoint={s3_server.endpoint}", retry=None)
    with pytest.raises(StoreError) as info:
        store.check_reachable()
    assert not isinstance(info.value, TransientStoreError)
    assert "bucket 'no-such-bucket-here' does not exist at http://127.0.0.1" in str(info.value)
