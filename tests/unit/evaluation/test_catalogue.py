"""The phone's template cache over a catalogue: hits, what a partial hit saves, eviction by name."""

from __future__ import annotations

import numpy as np
import pytest

from sakura.evaluation.catalogue import PooledEdit, drifting, hit_latency, run_catalogue, zipf_ranks

#: One edit: a miss takes 10 s and 100 bytes and keeps half the shards (50 bytes); a hit of the
#: whole template would take 2 s.
EDIT = PooledEdit(miss_s=10.0, miss_bytes=100, kept_bytes=50, kept_fraction=0.5, full_hit_s=2.0)


def test_a_hit_saves_the_kept_part_of_a_miss():
    assert hit_latency(10.0, 2.0, 1.0) == 2.0 and hit_latency(10.0, 2.0, 0.0) == 10.0
    assert EDIT.hit(0.5) == (pytest.approx(6.0), 50)
    assert hit_latency(1.0, 2.0, 1.0) == 1.0  # never slower than the miss


@pytest.mark.parametrize(("eviction", "hits"), [("lru", 1), ("lfu", 2)])
def test_templates_go_through_a_budgeted_cache_evicting_by_name(eviction, hits):
    # room for two templates; template 2 evicts 1 (both policies); then 1 evicts the least recent
    # (0, under LRU) or the least used (2, under LFU), so only LFU still holds 0 at the end
    result = run_catalogue([0, 1, 0, 2, 1, 0], [EDIT], 100, eviction, np.random.default_rng(0))
    assert result.edits == 6 and result.hits == hits
    assert result.latency_s[2] == pytest.approx(6.0) and result.bytes_fetched[2] == 50
    assert sum(result.latency_s) == pytest.approx(6 * 10.0 - hits * 4.0)


def test_warmup_edits_fill_the_cache_and_are_not_counted():
    result = run_catalogue([0, 0, 0], [EDIT], 100, "lru", np.random.default_rng(0), warmup=1)
    assert result.edits == 2 and result.hits == 2 and result.hit_ratio == 1.0


def test_a_template_larger_than_the_budget_is_never_a_hit():
    result = run_catalogue([0, 0], [EDIT], 49, "lru", np.random.default_rng(0))
    assert result.hits == 0 and result.bytes_fetched == [100, 100]


def test_zipf_ranks_favour_the_head_as_alpha_grows():
    rng = np.random.default_rng(1)
    flat, steep = (zipf_ranks(1000, alpha, 20_000, rng) for alpha in (0.0, 1.0))
    assert 0.05 < np.mean(flat < 100) < 0.15  # uniform: a tenth of draws in the top tenth
    assert np.mean(steep < 100) > 0.6  # harmonic: ln(100)/ln(1000) of them, about two thirds


def test_drifting_popularity_hands_the_top_rank_to_a_new_template_every_few_edits():
    ranks = np.array([0, 0, 1, 0, 2, 0])
    assert drifting(ranks, 2).tolist() == [0, 0, 0, 1, 0, 2]  # edits 2-3: template 1 on top, 0 second


def test_a_cache_that_keeps_the_templates_objects_makes_a_hit_a_warm_edit():
    computed = PooledEdit(miss_s=10.0, miss_bytes=100, kept_bytes=0, kept_fraction=0.0, full_hit_s=2.0,
                          objects_bytes=30, warm_s=4.0, warm_bytes=20)  # the phone computed every block
    shards_only = run_catalogue([0, 0], [computed], 100, "lru", np.random.default_rng(0))
    assert shards_only.hits == 0  # nothing fetched, nothing kept
    with_objects = run_catalogue([0, 0], [computed], 100, "lru", np.random.default_rng(0), keep_objects=True)
    assert with_objects.hits == 1 and with_objects.latency_s == [10.0, 4.0] and with_objects.bytes_fetched == [100, 20]
