"""The shard cache never touches a file outside its folder, whatever names it is given or finds."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from sakura.edge_client._cache import ShardCache
from sakura.edge_client.errors import CachePathError
from sakura.platform.errors import InvalidTemplateId
from sakura.platform.layout import InvalidName

RANK = {"compact": 0, "full": 1}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def files_outside(root: Path, cache: Path) -> list[Path]:
    return [p for p in root.rglob("*") if not p.is_dir() and cache not in p.parents]


@pytest.mark.parametrize("level", ["compact/../../../../escaped", "../escaped", "full/x", "", ".", "Full", "full\x00"])
def test_a_level_name_from_a_hostile_manifest_never_writes_outside_the_folder(tmp_path, level):
    cache = ShardCache(tmp_path / "cache", 10_000)
    with pytest.raises(InvalidName):
        cache.write("tpl", 1, 0, level, b"server-chosen bytes", rank={level: 9})
    with pytest.raises(InvalidName):
        cache.read("tpl", 1, 0, level, sha(b"server-chosen bytes"))
    assert files_outside(tmp_path, tmp_path / "cache") == [] and cache.used_bytes == 0


@pytest.mark.parametrize("template, version, index", [
    ("../etc", 1, 0), ("a/b", 1, 0), ("tpl", 0, 0), ("tpl", "1", 0), ("tpl", True, 0), ("tpl", 10**10, 0),
    ("tpl", 1, -1), ("tpl", 1, "0"), ("tpl", 1, True), ("tpl", 1, 10**7),
])
def test_template_version_and_index_follow_the_project_grammars(tmp_path, template, version, index):
    cache = ShardCache(tmp_path / "cache", 10_000)
    with pytest.raises((InvalidName, InvalidTemplateId)):
        cache.write(template, version, index, "full", b"x", rank=RANK)
    with pytest.raises((InvalidName, InvalidTemplateId)):
        cache.levels(template, version, index)
    assert files_outside(tmp_path, tmp_path / "cache") == []


def test_a_symlinked_template_folder_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "cache"
    root.mkdir()
    (root / "tpl").symlink_to(outside, target_is_directory=True)
    cache = ShardCache(root, 10_000)
    for call in (lambda: cache.write("tpl", 1, 0, "full", b"x" * 10, rank=RANK),
                 lambda: cache.write_manifest("tpl", 1, b"{}"),
                 lambda: cache.read("tpl", 1, 0, "full", sha(b"x" * 10)),
                 lambda: cache.touch("tpl")):
        with pytest.raises(CachePathError):
            call()
    assert list(outside.rglob("*")) == []


def test_a_symlinked_shard_file_is_neither_counted_nor_read(tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(b"not the cache's")
    root = tmp_path / "cache"
    (root / "tpl" / "1").mkdir(parents=True)
    (root / "tpl" / "1" / "0.full").symlink_to(secret)
    cache = ShardCache(root, 10_000)
    assert cache.used_bytes == 0 and cache.levels("tpl", 1, 0) == []
    with pytest.raises(CachePathError):
        cache.read("tpl", 1, 0, "full", sha(b"not the cache's"))
    with pytest.raises(CachePathError):
        cache.write("tpl", 1, 0, "full", b"x", rank=RANK)
    assert secret.read_bytes() == b"not the cache's"


def test_eviction_never_follows_a_planted_link_out_of_the_folder(tmp_path):
    outside = tmp_path / "outside"
    (outside / "1").mkdir(parents=True)
    (outside / "1" / "0.full").write_bytes(b"precious")
    root = tmp_path / "cache"
    root.mkdir()
    (root / "evil").symlink_to(outside, target_is_directory=True)
    cache = ShardCache(root, 0)  # a zero budget evicts everything it counted
    assert cache.used_bytes == 0
    assert (outside / "1" / "0.full").read_bytes() == b"precious"


def test_files_with_names_the_cache_never_writes_are_ignored(tmp_path):
    root = tmp_path / "cache"
    (root / "tpl" / "1").mkdir(parents=True)
    for name in ("0.Full", "x.full", "00.full", "notes.txt"):
        (root / "tpl" / "1" / name).write_bytes(b"?")
    (root / "Bad" / "1").mkdir(parents=True)
    (root / "Bad" / "1" / "0.full").write_bytes(b"?")
    (root / "tpl" / "01").mkdir()
    (root / "tpl" / "01" / "0.full").write_bytes(b"?")
    cache = ShardCache(root, 0)
    assert cache.used_bytes == 0
    assert sum(1 for p in root.rglob("*") if p.is_file() and p.name != ".lock") == 6  # not ours to delete
