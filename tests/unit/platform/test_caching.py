"""The one budgeted cache: eviction order, what never fits, disk entries verified and adopted."""

from __future__ import annotations

import hashlib
import os
import tracemalloc

import pytest

from sakura.platform.caching import EVICTION_POLICIES, Budget, DiskCache, MemoryCache


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_least_recently_used_entries_go_first_and_a_read_counts_as_a_use():
    cache: MemoryCache[str, bytes] = MemoryCache(10)
    for key in "abc":
        cache.put(key, key.encode() * 3)
    assert cache.get("a") == b"aaa"  # now b is the oldest
    cache.put("d", b"dddd")  # 13 bytes: b goes
    assert cache.get("b") is None and cache.get("a") == b"aaa" and cache.used == 10 and len(cache) == 3
    cache.put("c", b"c")  # a replacement costs its new size
    assert cache.used == 8
    cache.discard("c")
    assert cache.get("c") is None and cache.used == 7


def test_an_entry_larger_than_the_budget_is_refused_and_evicts_nothing():
    cache: MemoryCache[str, bytes] = MemoryCache(4)
    cache.put("a", b"aa")
    cache.put("big", b"x" * 5)
    assert cache.get("big") is None and cache.get("a") == b"aa"


def test_a_cost_function_makes_a_budget_of_entries():
    cache: MemoryCache[int, object] = MemoryCache(2, cost=lambda _: 1)
    for key in range(3):
        cache.put(key, object())
    assert cache.get(0) is None and cache.get(1) is not None and len(cache) == 2


def test_budget_reports_victims_and_eviction_is_chosen_by_name():
    budget: Budget[str] = Budget(5)
    assert budget.admit("a", 3) == [] and budget.admit("b", 2) == [] and budget.admit("c", 4) == ["a", "b"]
    assert budget.admit("d", 6) is None and "c" in budget and budget.used == 4
    with pytest.raises(KeyError):
        Budget(5, eviction="clock")
    assert "lru" in EVICTION_POLICIES


def test_lfu_evicts_the_fewest_uses_first_and_lfu_history_remembers_an_evicted_entrys_uses():
    budget: Budget[str] = Budget(2, "lfu")
    budget.admit("a", 1)
    budget.admit("b", 1)
    for _ in range(3):
        budget.touch("a")  # a: 4 uses, b: 1
    assert budget.admit("c", 1) == ["b"]  # not the least recent (a): the least used
    for eviction, order in (("lfu", ["a", "b"]), ("lfu-history", ["b", "a"])):
        policy = EVICTION_POLICIES[eviction]()
        for key in "aaabb":
            policy.used(key)
        policy.forget("a")  # evicted with 3 uses
        policy.used("a")  # back: 1 use, or 4 with its history, against b's 2
        assert list(policy.victims(None)) == order, eviction


def test_disk_entries_are_verified_on_read_and_rot_is_dropped(tmp_path):
    cache = DiskCache(tmp_path, 100)
    data = b"payload"
    cache.put(sha(data), data)
    assert cache.get(sha(data), len(data)) == data
    (tmp_path / f"{sha(data)}.bin").write_bytes(b"rotten!")
    assert cache.get(sha(data), len(data)) is None and not (tmp_path / f"{sha(data)}.bin").exists() and cache.used == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]  # writes left no temp file


def test_a_disk_entry_grown_past_its_length_is_read_no_further_and_dropped(tmp_path):
    """A file grown after it was cached is read no further than the length the manifest gives
    (plus one byte), and dropped."""
    cache = DiskCache(tmp_path, 100)
    data = b"payload"
    cache.put(sha(data), data)
    with open(tmp_path / f"{sha(data)}.bin", "ab") as f:
        f.write(b"x" * (4 << 20))
    tracemalloc.start()
    try:
        assert cache.get(sha(data), len(data)) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20 and not (tmp_path / f"{sha(data)}.bin").exists() and cache.used == 0


def test_a_restarted_disk_cache_adopts_its_files_oldest_first_within_budget(tmp_path):
    blobs = [bytes([i]) * 40 for i in range(3)]
    first = DiskCache(tmp_path, 1000)
    for i, blob in enumerate(blobs):
        first.put(sha(blob), blob)
        os.utime(tmp_path / f"{sha(blob)}.bin", (1000 + i, 1000 + i))
    again = DiskCache(tmp_path, 80)  # room for two: the oldest file goes
    assert again.used == 80 and not (tmp_path / f"{sha(blobs[0])}.bin").exists()
    assert again.get(sha(blobs[2]), 40) == blobs[2]
    again.put(sha(b"n" * 40), b"n" * 40)  # blobs[1] is now the least recently used
    assert again.get(sha(blobs[1]), 40) is None and again.get(sha(blobs[2]), 40) == blobs[2]


def test_a_plan_changes_nothing_counts_what_the_caller_frees_and_never_names_the_incoming_entry():
    budget: Budget[str] = Budget(10)
    budget.add("a", 4)
    budget.add("b", 4)
    assert budget.plan("c", 4) == ["a"] and budget.used == 8 and "a" in budget
    assert budget.plan("c", 4, freed=2) == [] and budget.plan("b", 10) == ["a"]
    assert budget.plan("c", 11) is None and budget.plan(None) == []
    budget.budget = 5  # a smaller budget: plan(None) says what goes to get under it
    assert budget.plan(None) == ["a"]
    budget.add("c", 9)  # add never evicts: the caller asked plan first
    assert budget.used == 17 and not budget.fits(0) and budget.fits(0, freed=12)
