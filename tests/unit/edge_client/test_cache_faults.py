"""The shard cache under disk faults: writes are best effort, reads verified, manifests heal."""

from __future__ import annotations

import errno
import hashlib
import logging
import os
from pathlib import Path

import pytest

from sakura.edge_client._cache import ShardCache

RANK = {"compact": 0, "full": 1}
LOGGER = "sakura.edge_client._cache"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def on_disk(root: Path) -> int:
    return sum(p.stat().st_size for p in root.glob("*/*/*"))


def temp_files(root: Path) -> list[Path]:
    return list(root.rglob(".tmp-*"))


def test_a_full_disk_makes_a_write_return_false_and_leaves_nothing_behind(tmp_path, monkeypatch, caplog):
    cache = ShardCache(tmp_path, 10_000)
    assert cache.write("tpl", 1, 0, "compact", b"c" * 100, rank=RANK)

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert cache.write("tpl", 1, 0, "full", b"f" * 300, rank=RANK) is False
        assert cache.write_manifest("tpl", 1, b"{}") is False
    assert "No space left on device" in caplog.text
    assert temp_files(tmp_path) == []
    assert cache.used_bytes == 100 == on_disk(tmp_path)
    assert cache.levels("tpl", 1, 0) == ["compact"]  # the upgrade failed: the old level stays


def test_a_file_where_a_folder_should_be_makes_a_write_return_false(tmp_path):
    cache = ShardCache(tmp_path, 10_000)
    (tmp_path / "tpl").mkdir()
    (tmp_path / "tpl" / "1").write_bytes(b"in the way")
    assert cache.write("tpl", 1, 0, "full", b"f" * 10, rank=RANK) is False
    assert cache.write_manifest("tpl", 1, b"{}") is False
    assert cache.used_bytes == 0 and temp_files(tmp_path) == []


def test_a_failed_write_of_the_temp_file_removes_it(tmp_path, monkeypatch):
    cache = ShardCache(tmp_path, 10_000)

    def failing_fsync(_fd):
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    assert cache.write("tpl", 1, 0, "full", b"f" * 10, rank=RANK) is False
    assert temp_files(tmp_path) == [] and cache.used_bytes == 0


def test_a_file_that_cannot_be_evicted_stays_counted(tmp_path, monkeypatch):
    cache = ShardCache(tmp_path, 1000)
    cache.write("a", 1, 0, "full", b"a" * 600, rank=RANK)
    unlink = os.unlink

    def refuse(path, *args, **kwargs):
        if Path(path).name == "0.full" and Path(path).parent.parent.name == "a":
            raise PermissionError(errno.EACCES, "Permission denied")
        return unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", refuse)
    assert cache.write("b", 1, 0, "full", b"b" * 600, rank=RANK) is False
    assert cache.used_bytes == 600 == on_disk(tmp_path)


def test_an_unreadable_cached_file_is_a_miss(tmp_path, monkeypatch):
    cache = ShardCache(tmp_path, 1000)
    cache.write("tpl", 1, 0, "full", b"f" * 10, rank=RANK)
    real_open = os.open

    def failing_open(path, flags, *args, **kwargs):
        if str(path).endswith("0.full"):
            raise OSError(errno.EIO, "I/O error")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", failing_open)
    assert cache.read("tpl", 1, 0, "full", sha(b"f" * 10)) is None


def test_a_truncated_cached_manifest_is_not_returned_and_is_deleted(tmp_path):
    manifest = b'{"template_id": "tpl", "version": 1, "shards": []}'
    cache = ShardCache(tmp_path, 10_000)
    assert cache.write_manifest("tpl", 1, manifest)
    assert cache.read_manifest("tpl", 1) == manifest
    path = tmp_path / "tpl" / "1" / "manifest.json"
    path.write_bytes(path.read_bytes()[:-7])  # a torn write or bit rot
    assert cache.read_manifest("tpl", 1) is None  # the session refetches it
    assert not path.exists() and cache.used_bytes == 0
    assert cache.write_manifest("tpl", 1, manifest) and cache.read_manifest("tpl", 1) == manifest


def test_a_manifest_altered_on_disk_does_not_verify_after_a_restart(tmp_path):
    cache = ShardCache(tmp_path, 10_000)
    cache.write_manifest("tpl", 1, b'{"version": 1}')
    cache.close()
    path = tmp_path / "tpl" / "1" / "manifest.json"
    path.write_bytes(path.read_bytes().replace(b"1}", b"2}"))  # same length, other content
    assert ShardCache(tmp_path, 10_000).read_manifest("tpl", 1) is None and not path.exists()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names file descriptors through /proc")
def test_the_data_is_fsynced_before_the_rename_and_the_rename_before_the_old_level_goes(tmp_path, monkeypatch):
    events: list[tuple[str, str]] = []
    fsync, replace, unlink = os.fsync, os.replace, os.unlink

    def record_fsync(fd):
        events.append(("fsync", Path(os.readlink(f"/proc/self/fd/{fd}")).name))
        return fsync(fd)

    def record_replace(src, dst, *args, **kwargs):
        events.append(("replace", Path(dst).name))
        return replace(src, dst, *args, **kwargs)

    def record_unlink(path, *args, **kwargs):
        events.append(("unlink", Path(path).name))
        return unlink(path, *args, **kwargs)

    cache = ShardCache(tmp_path, 10_000)
    cache.write("tpl", 1, 0, "compact", b"c" * 10, rank=RANK)
    monkeypatch.setattr(os, "fsync", record_fsync)
    monkeypatch.setattr(os, "replace", record_replace)
    monkeypatch.setattr(os, "unlink", record_unlink)
    cache.write_manifest("tpl", 1, b"{}")
    assert [kind for kind, _ in events] == ["fsync", "replace"] and events[0][1].startswith(".tmp-")
    events.clear()
    cache.write("tpl", 1, 0, "full", b"f" * 20, rank=RANK)
    assert [kind for kind, _ in events] == ["fsync", "replace", "fsync", "unlink"]
    assert events[2] == ("fsync", "1") and events[3] == ("unlink", "0.compact")  # the folder, then the old level
