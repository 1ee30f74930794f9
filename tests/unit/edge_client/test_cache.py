"""The on-device shard cache: byte budget, LRU by template, integrity, atomicity."""

from __future__ import annotations

import hashlib
import io
import os
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sakura.edge_client._cache import ShardCache
from sakura.platform.errors import InvalidTemplateId
from tests.hypothesis_seed import name_the_seed, per_run_seed

RANK = {"compact": 0, "medium": 1, "full": 2}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_round_trip_and_integrity(tmp_path):
    cache = ShardCache(tmp_path, 10_000)
    assert cache.write("tpl", 1, 0, "medium", b"x" * 100, rank=RANK)
    assert cache.levels("tpl", 1, 0) == ["medium"]
    assert cache.read("tpl", 1, 0, "medium", sha(b"x" * 100)) == b"x" * 100
    (tmp_path / "tpl" / "1" / "0.medium").write_bytes(b"y" * 100)  # bit rot
    assert cache.read("tpl", 1, 0, "medium", sha(b"x" * 100)) is None
    assert cache.levels("tpl", 1, 0) == [] and not (tmp_path / "tpl" / "1" / "0.medium").exists()


def test_a_better_level_replaces_a_worse_one_but_not_the_other_way(tmp_path):
    cache = ShardCache(tmp_path, 10_000)
    cache.write("tpl", 1, 0, "compact", b"c" * 10, rank=RANK)
    cache.write("tpl", 1, 0, "full", b"f" * 50, rank=RANK)
    assert cache.levels("tpl", 1, 0) == ["full"] and cache.used_bytes == 50


def test_least_recently_used_template_goes_first_and_the_one_in_use_stays(tmp_path):
    cache = ShardCache(tmp_path, 300)
    for template in ("a", "b"):
        cache.touch(template)
        cache.write(template, 1, 0, "full", b"1" * 100, rank=RANK)
        time.sleep(0.01)
    cache.touch("a")  # a is used again: b is now the oldest
    cache.touch("c")
    assert cache.write("c", 1, 0, "full", b"2" * 150, rank=RANK)
    assert cache.levels("b", 1, 0) == [] and cache.levels("a", 1, 0) == ["full"]
    assert not cache.write("c", 1, 1, "full", b"3" * 400, rank=RANK)  # larger than the budget: not kept
    assert cache.used_bytes <= 300



def test_a_template_is_evicted_only_as_far_as_room_is_needed_its_last_shards_first(tmp_path):
    cache = ShardCache(tmp_path, 1000)
    cache.touch("old")
    assert cache.write_manifest("old", 1, b"{}")
    for index in range(3):
        assert cache.write("old", 1, index, "full", b"o" * 300, rank=RANK)
    time.sleep(0.01)
    cache.touch("new")
    # 467 bytes too many (the manifest is 67): two shards go
    assert cache.write("new", 1, 0, "full", b"n" * 500, rank=RANK)
    assert [cache.levels("old", 1, i) for i in range(3)] == [["full"], [], []]
    assert cache.read_manifest("old", 1) == b"{}"

@per_run_seed
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcd"), st.integers(0, 5), st.sampled_from(list(RANK)), st.integers(1, 400)),
                max_size=40))
def test_the_budget_is_never_exceeded(tmp_path_factory, writes):
    name_the_seed()
    directory = tmp_path_factory.mktemp("cache")
    cache = ShardCache(directory, 1000)
    for template, index, level, size in writes:
        cache.touch(template)
        cache.write(template, 1, index, level, os.urandom(size), rank=RANK)
        assert cache.used_bytes <= 1000
        on_disk = sum(p.stat().st_size for p in directory.glob("*/*/*"))
        assert on_disk == cache.used_bytes


def test_reopening_counts_what_is_there_drops_crash_leftovers_and_honours_a_smaller_budget(tmp_path):
    cache = ShardCache(tmp_path, 1000)
    for template in ("a", "b"):
        cache.touch(template)
        cache.write(template, 1, 0, "full", b"z" * 400, rank=RANK)
        time.sleep(0.01)
    (tmp_path / "a" / "1" / ".tmp-deadbeef").write_bytes(b"half a write")
    cache.close()  # while it is open, a temp file may be a write in progress
    again = ShardCache(tmp_path, 500)
    assert again.used_bytes == 400 and again.levels("b", 1, 0) == ["full"]
    assert not (tmp_path / "a" / "1" / ".tmp-deadbeef").exists()


def test_malformed_names_are_refused(tmp_path):
    cache = ShardCache(tmp_path, 1000)
    with pytest.raises(InvalidTemplateId):
        cache.write("../etc", 1, 0, "full", b"x", rank=RANK)
    with pytest.raises(ValueError):
        cache.read("tpl", 0, 0, "full", sha(b""))


def test_a_new_version_fits_by_evicting_the_old_version_of_the_template_in_use_first(tmp_path):
    cache = ShardCache(tmp_path, 1000)
    cache.touch("other")
    assert cache.write("other", 1, 0, "full", b"o" * 300, rank=RANK)
    time.sleep(0.01)
    cache.touch("tpl")
    assert cache.write("tpl", 1, 0, "full", b"1" * 500, rank=RANK)
    assert cache.write("tpl", 2, 0, "full", b"2" * 400, rank=RANK)  # v2 is in use: v1 goes, not "other"
    assert cache.levels("tpl", 1, 0) == [] and cache.levels("tpl", 2, 0) == ["full"]
    assert cache.levels("other", 1, 0) == ["full"] and cache.used_bytes == 700
    assert cache.write("tpl", 2, 1, "full", b"3" * 500, rank=RANK)  # then other templates, LRU
    assert cache.levels("other", 1, 0) == [] and cache.used_bytes == 900


def test_the_version_in_use_is_never_evicted_for_itself(tmp_path):
    cache = ShardCache(tmp_path, 1000)
    assert cache.write("tpl", 2, 0, "full", b"a" * 600, rank=RANK)
    assert not cache.write("tpl", 2, 1, "full", b"b" * 600, rank=RANK)
    assert cache.levels("tpl", 2, 0) == ["full"] and cache.used_bytes == 600


def test_an_upgrade_that_cannot_fit_keeps_the_old_level(tmp_path):
    cache = ShardCache(tmp_path, 100)
    assert cache.write("tpl", 1, 0, "compact", b"c" * 50, rank=RANK)
    assert cache.write("tpl", 1, 1, "compact", b"c" * 40, rank=RANK)
    assert not cache.write("tpl", 1, 0, "full", b"f" * 150, rank=RANK)  # larger than the budget
    assert not cache.write("tpl", 1, 0, "full", b"f" * 70, rank=RANK)  # 40 + 70 > 100 even without the compact
    assert cache.levels("tpl", 1, 0) == ["compact"] and cache.read("tpl", 1, 0, "compact", sha(b"c" * 50)) == b"c" * 50
    assert cache.used_bytes == 90


def test_an_upgrade_may_use_the_room_of_the_level_it_replaces(tmp_path):
    cache = ShardCache(tmp_path, 100)
    cache.write("tpl", 1, 0, "compact", b"c" * 50, rank=RANK)
    cache.write("tpl", 1, 1, "compact", b"c" * 40, rank=RANK)
    assert cache.write("tpl", 1, 0, "full", b"f" * 60, rank=RANK)
    assert cache.levels("tpl", 1, 0) == ["full"] and cache.used_bytes == 100
    assert sorted(p.name for p in (tmp_path / "tpl" / "1").iterdir()) == ["0.full", "1.compact"]


def test_a_worse_level_is_not_kept_next_to_a_better_one(tmp_path):
    cache = ShardCache(tmp_path, 1000)
    cache.write("tpl", 1, 0, "full", b"f" * 50, rank=RANK)
    assert not cache.write("tpl", 1, 0, "compact", b"c" * 10, rank=RANK)
    assert cache.levels("tpl", 1, 0) == ["full"] and cache.used_bytes == 50


def test_context_and_source_objects_are_kept_verified_and_survive_a_reopen(tmp_path):
    cache = ShardCache(tmp_path, 1000)
    assert cache.write_object("tpl", 1, "prompt_embeds", b"p" * 100)
    assert cache.read_object("tpl", 1, "prompt_embeds", sha(b"p" * 100)) == b"p" * 100
    assert cache.read_object("tpl", 1, "prompt_embeds", sha(b"q" * 100)) is None  # not what the manifest lists
    assert cache.read_object("tpl", 1, "prompt_embeds", sha(b"p" * 100)) is None and cache.used_bytes == 0
    assert cache.write_object("tpl", 1, "template_cells", b"c" * 80)
    cache.close()
    again = ShardCache(tmp_path, 1000)  # counted by the start-up scan
    assert again.used_bytes == 80 and again.read_object("tpl", 1, "template_cells", sha(b"c" * 80)) == b"c" * 80
    (tmp_path / "tpl" / "1" / "object-template_cells.zst").write_bytes(b"d" * 80)  # bit rot
    assert again.read_object("tpl", 1, "template_cells", sha(b"c" * 80)) is None and again.used_bytes == 0


def test_made_arrays_are_kept_with_their_own_sha256_and_never_unpickled(tmp_path):
    cache = ShardCache(tmp_path, 100_000)
    made = {"reference_latents": np.arange(12, dtype=np.float32).reshape(3, 4), "reference_ids": np.ones((3, 4))}
    assert cache.write_made("tpl", 1, "made_source", made)
    back = cache.read_made("tpl", 1, "made_source")
    assert back is not None and set(back) == set(made)
    assert all(np.array_equal(back[name], made[name]) and back[name].dtype == made[name].dtype for name in made)
    path = tmp_path / "tpl" / "1" / "object-made_source.zst"
    data = path.read_bytes()
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # bit rot: a miss, and the file is gone
    assert cache.read_made("tpl", 1, "made_source") is None and not path.exists()
    pickled = io.BytesIO()
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert cache.write_object("tpl", 1, "made_source", hashlib.sha256(pickled.getvalue()).digest() + pickled.getvalue())
    assert cache.read_made("tpl", 1, "made_source") is None  # checks out, but is no npz of plain arrays


def test_objects_outlast_the_shards_of_their_version_and_the_manifest_outlasts_both(tmp_path):
    cache = ShardCache(tmp_path, 1000)
    cache.touch("old")
    assert cache.write_manifest("old", 1, b"{}")  # 67 bytes framed
    assert cache.write_object("old", 1, "prompt_embeds", b"p" * 200)
    for index in range(2):
        assert cache.write("old", 1, index, "full", b"o" * 300, rank=RANK)
    time.sleep(0.01)
    cache.touch("new")
    assert cache.write("new", 1, 0, "full", b"n" * 600, rank=RANK)  # both shards go, the object stays
    assert [cache.levels("old", 1, i) for i in range(2)] == [[], []]
    assert cache.read_object("old", 1, "prompt_embeds", sha(b"p" * 200)) == b"p" * 200
    assert cache.write("new", 1, 1, "full", b"m" * 200, rank=RANK)  # then the object, the manifest last
    assert cache.read_object("old", 1, "prompt_embeds", sha(b"p" * 200)) is None
    assert cache.read_manifest("old", 1) == b"{}"


@pytest.mark.parametrize("name", ["../x", "Prompt", "a-b", "", "x" * 33, "manifest.json"])
def test_malformed_object_names_are_refused(tmp_path, name):
    cache = ShardCache(tmp_path, 1000)
    with pytest.raises(ValueError):
        cache.write_object("tpl", 1, name, b"x")
    with pytest.raises(ValueError):
        cache.read_object("tpl", 1, name, sha(b"x"))
