"""One cache folder, one cache: sessions of a process share it, other processes stay out of it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sakura.edge_client import _cache_files as cache_files
from sakura.edge_client._cache import ShardCache

RANK = {"compact": 0, "full": 1}
CHILD = """
import sys
from sakura.edge_client._cache import ShardCache
cache = ShardCache(sys.argv[1], 1000)
print(cache.write("child", 1, 0, "full", b"c" * 600, rank={"full": 0}), cache.used_bytes, flush=True)
sys.stdin.readline()  # hold the folder until told to go
"""


def on_disk(root: Path) -> int:
    return sum(p.stat().st_size for p in root.glob("*/*/*"))


def child(folder: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", CHILD, str(folder)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def test_two_caches_on_one_folder_in_a_process_share_one_budget(tmp_path):
    first, second = ShardCache(tmp_path, 1000), ShardCache(tmp_path / "." / "", 1000)
    assert first.write("a", 1, 0, "full", b"a" * 600, rank=RANK)
    assert second.write("b", 1, 0, "full", b"b" * 600, rank=RANK)
    assert on_disk(tmp_path) <= 1000 and first.used_bytes == second.used_bytes == on_disk(tmp_path)
    assert first.levels("b", 1, 0) == ["full"] and first.levels("a", 1, 0) == []


def test_opening_a_folder_in_use_keeps_its_writes_in_progress(tmp_path):
    first = ShardCache(tmp_path, 1000)
    first.write("a", 1, 0, "full", b"a" * 100, rank=RANK)
    in_progress = tmp_path / "a" / "1" / ".tmp-0123456789abcdef"
    in_progress.write_bytes(b"half a write")  # as another session's write would be now
    second = ShardCache(tmp_path, 1000)
    assert in_progress.exists() and second.used_bytes == 100


def test_the_smallest_budget_of_the_open_caches_applies(tmp_path):
    large = ShardCache(tmp_path, 1000)
    for template in ("a", "b"):
        large.touch(template)
        large.write(template, 1, 0, "full", b"z" * 400, rank=RANK)
        time.sleep(0.01)
    small = ShardCache(tmp_path, 500)
    assert large.budget == small.budget == 500
    assert large.used_bytes == 400 and large.levels("b", 1, 0) == ["full"]  # the least recently used went
    small.close()
    assert large.budget == 1000 and large.write("c", 1, 0, "full", b"c" * 500, rank=RANK)


def test_threads_writing_through_several_caches_on_one_folder_keep_the_budget(tmp_path):
    caches = [ShardCache(tmp_path, 1000) for _ in range(3)]

    def writes(worker: int) -> None:
        cache = caches[worker % len(caches)]
        for i in range(40):
            template = f"t{(worker + i) % 5}"
            cache.touch(template)
            level = "full" if i % 3 else "compact"
            cache.write(template, 1 + i % 2, i % 4, level, os.urandom(100 + 37 * (i % 7)), rank=RANK)

    threads = [threading.Thread(target=writes, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert on_disk(tmp_path) == caches[0].used_bytes <= 1000
    assert not list(tmp_path.rglob(".tmp-*"))


def test_a_second_process_neither_writes_nor_removes_anything(tmp_path):
    cache = ShardCache(tmp_path, 1000)
    assert cache.write("a", 1, 0, "full", b"a" * 600, rank=RANK)
    in_progress = tmp_path / "a" / "1" / ".tmp-0123456789abcdef"
    in_progress.write_bytes(b"half a write")
    proc = child(tmp_path)
    out, _ = proc.communicate("\n", timeout=60)
    assert out.split() == ["False", "0"]  # off for it: no write, nothing counted
    assert in_progress.exists() and not (tmp_path / "child").exists()
    assert cache.used_bytes == 600 and cache.levels("a", 1, 0) == ["full"]


def test_a_process_takes_the_folder_over_once_the_other_one_is_gone(tmp_path):
    proc = child(tmp_path)
    try:
        assert proc.stdout.readline().split() == ["True", "600"]
        cache = ShardCache(tmp_path, 1000)
        assert not cache.owned and cache.used_bytes == 0 and cache.levels("child", 1, 0) == []
        assert not cache.write("a", 1, 0, "full", b"a" * 300, rank=RANK)
    finally:
        proc.communicate("\n", timeout=60)
    assert cache.write("a", 1, 0, "full", b"a" * 300, rank=RANK)  # the folder is free: counted, then written
    assert cache.owned and cache.used_bytes == 900 == on_disk(tmp_path)
    assert cache.levels("child", 1, 0) == ["full"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_does_not_share_the_parents_ownership(tmp_path):
    cache = ShardCache(tmp_path, 1000)
    cache.write("a", 1, 0, "full", b"a" * 100, rank=RANK)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        ok = not cache.owned and not cache.write("b", 1, 0, "full", b"b" * 100, rank=RANK) and cache.used_bytes == 0
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert cache.owned and cache.used_bytes == 100 == on_disk(tmp_path)


def test_without_a_lock_only_old_temp_files_are_removed(tmp_path, monkeypatch):
    (tmp_path / "a" / "1").mkdir(parents=True)
    fresh, stale = tmp_path / "a" / "1" / ".tmp-fresh", tmp_path / "a" / "1" / ".tmp-stale"
    fresh.write_bytes(b"maybe another process's write in progress")
    stale.write_bytes(b"a crash's")
    old = time.time() - 86400
    os.utime(stale, (old, old))
    monkeypatch.setattr(cache_files, "fcntl", None, raising=False)
    ShardCache(tmp_path, 1000)
    assert fresh.exists() and not stale.exists() and cache_files.STALE_TMP_S < 86400
