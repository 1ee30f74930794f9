from __future__ import annotations

import numpy as np
import pytest

from sakura.platform import importance as imp
from sakura.platform.kv import KVPair, ShardKey, TemplateKV
from sakura.platform.models import Schedule, load_model
from tests.conftest import make_request, make_template


def test_attention_scores_average_calibration_requests():
    a = {ShardKey(0, 0): np.array([[0.1, 0.3]]), ShardKey(None, 1): np.array([[0.2, 0.2]])}
    b = {ShardKey(0, 0): np.array([[0.3, 0.1]]), ShardKey(None, 1): np.array([[0.0, 0.4]])}
    scores = imp.from_attention([a, b])
    assert scores.source == "attention"
    np.testing.assert_allclose(scores[ShardKey(0, 0)], [[0.2, 0.2]])
    np.testing.assert_allclose(scores[ShardKey(None, 1)], [[0.1, 0.3]])


def test_attention_scores_need_consistent_calibration_data():
    with pytest.raises(imp.ImportanceError):
        imp.from_attention([])
    with pytest.raises(imp.ImportanceError):
        imp.from_attention([{ShardKey(0, 0): np.ones((1, 2))}, {ShardKey(0, 1): np.ones((1, 2))}])


def test_key_norm_fallback_ranks_large_keys_first():
    k = np.zeros((1, 3, 2), np.float32)
    k[0, 1] = [3, 4]
    k[0, 2] = [1, 0]
    kv = TemplateKV("fp", {ShardKey(0, 0): KVPair(k, k.copy())})
    scores = imp.from_key_norms(kv)
    assert scores.source == "key_norm"
    np.testing.assert_allclose(scores[ShardKey(0, 0)], [[0, 5, 1]])


def test_scores_round_trip_through_bytes_and_reject_garbage():
    scores = imp.ImportanceScores("attention", {ShardKey(None, 2): np.ones((2, 3)), ShardKey(1, 0): np.zeros((2, 3))})
    back = imp.ImportanceScores.from_bytes(scores.to_bytes())
    assert back.source == "attention" and set(back.scores) == set(scores.scores)
    np.testing.assert_array_equal(back[ShardKey(None, 2)], np.ones((2, 3)))
    with pytest.raises(imp.ImportanceError):
        imp.ImportanceScores.from_bytes(b"not an npz")


def test_captured_mass_concentrates_where_requests_look():
    """Scores from a real capture are per (head, token) and not uniform."""
    adapter = load_model("tiny-sd3")
    captured = adapter.capture(make_template(adapter), make_request(adapter, "skimage:chelsea", 1), Schedule(2))
    scores = imp.from_attention([captured.attention_mass])
    first = scores[ShardKey(0, 0)]
    assert first.shape == (adapter.info().heads, 256)
    assert first.max() > 2 * np.median(first)
