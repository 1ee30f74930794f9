"""The phone's cache folder after someone else has been in it (issue 36, item 5.4): files counted
at start-up and since swapped for a FIFO, a directory or a much larger file, cut short, or a
manifest rewritten with a checksum that matches its lies. Each is a miss (or a typed error) that
reads at most the bytes the cache counted plus one, never waits on a FIFO, deletes only inside
the folder, and sends the phone back to the server for what it lost."""

from __future__ import annotations

import hashlib
import json
import logging
import os

import pytest

from sakura.edge_client import EdgeSession, EditResult
from sakura.edge_client import _cache_files as files
from sakura.edge_client._cache import ShardCache
from sakura.edge_client.errors import InvalidManifest
from sakura.platform.images import load_image
from sakura.platform.library import TemplateLibrary
from sakura.platform.store import open_store
from tests.unit.edge_client.test_cache_paths import files_outside
from tests.unit.edge_client.test_session import PHOTO

RANK = {"compact": 0, "full": 1}
DATA = b"f" * 10


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def cache(tmp_path):
    cache = ShardCache(tmp_path / "cache", 10_000)
    assert cache.write("tpl", 1, 0, "full", DATA, rank=RANK)
    assert cache.write_object("tpl", 1, "prompt_embeds", DATA)
    yield cache
    cache.close()


@pytest.fixture
def reads(monkeypatch) -> list[int]:
    """The bytes each read of a cache file returned."""
    sizes: list[int] = []
    real = files.read_at_most

    def counted(path, size):
        data = real(path, size)
        sizes.append(len(data))
        return data

    monkeypatch.setattr(files, "read_at_most", counted)
    return sizes


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_swapped_in_for_a_cached_file_is_a_miss_that_reads_nothing_from_it(cache, tmp_path):
    path = tmp_path / "cache" / "tpl" / "1" / "0.full"
    path.unlink()
    os.mkfifo(path)
    writer = os.open(path, os.O_RDWR | os.O_NONBLOCK)  # a writer holds it, with bytes in its buffer
    try:
        os.write(writer, DATA + b"!")
        assert cache.read("tpl", 1, 0, "full", sha(DATA)) is None
        assert os.read(writer, 100) == DATA + b"!"  # not one byte was taken from it
    finally:
        os.close(writer)
    assert not path.exists() and cache.used_bytes == len(DATA)  # dropped; the object is still counted
    assert cache.write("tpl", 1, 0, "full", DATA, rank=RANK)  # and fetched again, as a file


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_for_the_used_mark_is_skipped_without_waiting_for_a_reader(cache, tmp_path, caplog):
    used = tmp_path / "cache" / "tpl" / files.USED
    used.unlink(missing_ok=True)
    os.mkfifo(used)  # no reader: a blocking open for writing would wait forever
    with caplog.at_level(logging.WARNING, logger="sakura.edge_client._cache"):
        cache.touch("tpl")
    assert "could not mark" in caplog.text
    assert cache.read("tpl", 1, 0, "full", sha(DATA)) == DATA  # the cache carries on


@pytest.mark.parametrize("name", ["0.full", "object-prompt_embeds.zst"])
def test_a_directory_swapped_in_for_a_cached_file_is_a_miss_and_is_never_written_through(cache, tmp_path, name):
    path = tmp_path / "cache" / "tpl" / "1" / name
    path.unlink()
    path.mkdir()
    (path / "inside").write_bytes(b"someone else's")
    if name == "0.full":
        assert cache.read("tpl", 1, 0, "full", sha(DATA)) is None
        assert cache.write("tpl", 1, 0, "full", DATA, rank=RANK) is False
    else:
        assert cache.read_object("tpl", 1, "prompt_embeds", sha(DATA)) is None
        assert cache.write_object("tpl", 1, "prompt_embeds", DATA) is False
    assert (path / "inside").read_bytes() == b"someone else's"  # neither deleted nor written into
    assert files_outside(tmp_path, tmp_path / "cache") == []


def test_a_cached_file_grown_past_its_counted_size_is_read_no_further_than_that(cache, tmp_path, reads):
    shard = tmp_path / "cache" / "tpl" / "1" / "0.full"
    with open(shard, "r+b") as f:
        f.truncate(1 << 40)  # a terabyte, sparse: the counted size lies
    assert cache.read("tpl", 1, 0, "full", sha(DATA)) is None
    assert reads == [len(DATA) + 1] and not shard.exists()


@pytest.mark.parametrize("name", ["0.full", "object-prompt_embeds.zst"])
def test_a_cached_file_of_another_size_than_the_manifest_says_is_a_miss_never_read(tmp_path, reads, name):
    """Counted at start-up as it is (a file planted while no process had the folder), a file larger
    than the object the manifest lists is dropped without a byte of it read."""
    folder = tmp_path / "cache" / "tpl" / "1"
    folder.mkdir(parents=True)
    (folder / name).write_bytes(DATA + b"x" * (1 << 20))
    cache = ShardCache(tmp_path / "cache", 1 << 30)
    read = {"0.full": lambda: cache.read("tpl", 1, 0, "full", sha(DATA), len(DATA)),
            "object-prompt_embeds.zst": lambda: cache.read_object("tpl", 1, "prompt_embeds", sha(DATA), len(DATA))}
    try:
        assert cache.used_bytes == len(DATA) + (1 << 20)
        assert read[name]() is None and reads == [] and not (folder / name).exists() and cache.used_bytes == 0
        (folder / name).write_bytes(DATA[:-1])  # shorter: the same
        assert read[name]() is None and reads == []
    finally:
        cache.close()


def test_a_shard_the_phone_kept_is_read_no_further_than_the_manifests_length(
    proxy, reference_model, tmp_path, phone_manifest, monkeypatch
):
    """An edit asks its cache for each kept shard with the manifest's length: a planted shard of a
    megabyte is never read, and the shard is fetched again."""
    cache_dir = tmp_path / "cache"
    with EdgeSession(proxy.url, cache_dir=cache_dir, models=lambda _: reference_model) as session:
        session.edit(load_image(PHOTO), "portrait", version=1, policy="fixed-compact")
    kept = sorted((cache_dir / "portrait" / "1").glob("*.compact"))
    assert kept
    for shard in kept:
        shard.write_bytes(b"x" * (1 << 20))  # planted while no process has the folder
    asked: list[int] = []
    real = files.read_at_most
    monkeypatch.setattr(files, "read_at_most", lambda path, size: asked.append(size) or real(path, size))
    fetched = len(proxy.requests)
    with EdgeSession(proxy.url, cache_dir=cache_dir, models=lambda _: reference_model) as session:
        result = session.edit(load_image(PHOTO), "portrait", version=1, policy="fixed-compact")
    assert isinstance(result, EditResult)
    assert all(size < 1 << 20 for size in asked), asked  # no planted shard was read
    shards = [r.path for r in proxy.requests[fetched:] if "/shards/" in r.path]
    assert len(shards) == len(kept)  # each fetched again


@pytest.mark.parametrize("keep", [0, 1, len(DATA) - 1])
def test_a_cached_file_cut_short_is_a_miss_and_is_deleted(cache, tmp_path, reads, keep):
    for path, read in ((tmp_path / "cache" / "tpl" / "1" / "0.full",
                        lambda: cache.read("tpl", 1, 0, "full", sha(DATA))),
                       (tmp_path / "cache" / "tpl" / "1" / "object-prompt_embeds.zst",
                        lambda: cache.read_object("tpl", 1, "prompt_embeds", sha(DATA)))):
        path.write_bytes(DATA[:keep])
        assert read() is None and not path.exists()
    assert reads == [keep, keep] and cache.used_bytes == 0


# -- a cached manifest that lies, with a checksum that matches ----------------------------------
@pytest.fixture(scope="module")
def phone_manifest(ref_library) -> dict:
    return json.loads(TemplateLibrary(open_store(ref_library)).manifest("portrait", 1).for_phone().to_json())


def _plant(cache_dir, body: bytes) -> None:
    """``body`` as the cached manifest of portrait v1, framed with its own checksum as the cache
    frames what it writes (what a process with the folder could leave)."""
    planted = ShardCache(cache_dir, 1 << 30)
    assert planted.write_manifest("portrait", 1, body)
    planted.close()


def test_a_cached_manifest_that_lies_about_sizes_is_refused_typed_without_a_request(
    proxy, reference_model, tmp_path, phone_manifest
):
    lying = json.loads(json.dumps(phone_manifest))
    for shard in lying["shards"]:
        for payload in shard["levels"].values():
            payload["length"] = 10**12
    _plant(tmp_path / "cache", json.dumps(lying).encode())
    with EdgeSession(proxy.url, cache_dir=tmp_path / "cache", models=lambda _: reference_model) as session:
        with pytest.raises(InvalidManifest, match="claims 1000000000000 bytes"):
            session.edit(load_image(PHOTO), "portrait", version=1, policy="fixed-compact")
    assert proxy.requests == []
    assert files_outside(tmp_path, tmp_path / "cache") == []


@pytest.mark.parametrize("body", [
    b'{"schema_version": "1.3", "version": ' + b"9" * 5000 + b"}",  # past int()'s digit limit
    b"[" * 100_000 + b"]" * 100_000,
    b"\xff\xfe not json",
], ids=["huge-number", "nested", "not-utf8"])
def test_a_cached_manifest_that_does_not_parse_is_fetched_again(proxy, reference_model, tmp_path, body):
    _plant(tmp_path / "cache", body)
    with EdgeSession(proxy.url, cache_dir=tmp_path / "cache", models=lambda _: reference_model) as session:
        result = session.edit(load_image(PHOTO), "portrait", version=1, policy="fixed-compact")
    assert isinstance(result, EditResult) and result.version == 1
    assert [r.path for r in proxy.requests if r.path.endswith("/manifest")] == [
        "/v1/templates/portrait/versions/1/manifest"]  # once, then kept
    with EdgeSession(proxy.url, cache_dir=tmp_path / "cache", models=lambda _: reference_model) as session:
        assert session.manifest("portrait", 1).version == 1
    assert len([r for r in proxy.requests if r.path.endswith("/manifest")]) == 1
