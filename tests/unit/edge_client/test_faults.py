"""Faults between the client and a real shard API: each ends in a completed edit or a typed
error within a bounded time; nothing hangs."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from sakura.edge_client import EdgeSession, RetryPolicy
from sakura.edge_client.errors import ServerError, ShardCorrupt, TransportError
from sakura.platform.images import load_image
from tests.unit.edge_client.test_session import PHOTO, exact_output

FAST_RETRY = RetryPolicy(attempts=3, backoff_s=0.01, max_backoff_s=0.05)


def session(proxy, model, **kwargs) -> EdgeSession:
    return EdgeSession(proxy.url, models=lambda _: model, retry=FAST_RETRY, **kwargs)


def test_a_connection_reset_mid_shard_resumes_with_a_range_request(proxy, reference_model):
    proxy.add(r"/shards/2/full$", "reset:60000")
    with session(proxy, reference_model) as s:
        result = s.edit(load_image(PHOTO), "portrait", policy="fixed-full")
    shard2 = [r for r in proxy.shard_requests() if r.path.endswith("/shards/2/full")]
    assert len(shard2) == 2 and "Range" not in shard2[0].headers
    assert shard2[1].headers["Range"] == "bytes=60000-" and shard2[1].headers["If-Range"].startswith('"')
    assert result.timeline.shards[2].attempts == 2
    np.testing.assert_array_equal(result.image, exact_output(reference_model, "portrait", PHOTO))


def test_a_503_burst_is_retried_through(proxy, reference_model):
    proxy.add(r"/shards/", "status:503", times=2)
    proxy.add(r"/shards/4/", "status:503", times=2)
    with session(proxy, reference_model) as s:
        result = s.edit(load_image(PHOTO), "portrait", policy="fixed-medium")
    assert result.levels == ["medium"] * 6 and len(proxy.shard_requests()) == 6 + 4


def test_a_corrupt_shard_is_refetched_never_used(proxy, reference_model):
    proxy.add(r"/shards/1/full$", "corrupt")
    with session(proxy, reference_model) as s:
        result = s.edit(load_image(PHOTO), "portrait", policy="fixed-full")
    assert sum(r.path.endswith("/shards/1/full") for r in proxy.shard_requests()) == 2
    np.testing.assert_array_equal(result.image, exact_output(reference_model, "portrait", PHOTO))


def test_a_shard_that_is_always_corrupt_is_a_typed_error(proxy, reference_model, tmp_path):
    proxy.add(r"/shards/3/", "corrupt", times=100)
    with session(proxy, reference_model, cache_dir=tmp_path) as s:
        with pytest.raises(ShardCorrupt):
            s.edit(load_image(PHOTO), "portrait", policy="fixed-compact")
        assert s.cache.levels("portrait", 1, 3) == []  # nothing bad was kept


def test_a_server_that_stops_answering_is_a_transport_error_after_its_attempts(proxy, reference_model):
    """Bounded by counts: each attempt times out after ``timeout_s`` without a byte, and the edit
    gives up after the policy's attempts, while the server still holds the requests."""
    hang = proxy.add(r"/shards/", "hang", times=100)
    with session(proxy, reference_model, timeout_s=0.5) as s:
        with pytest.raises(TransportError, match="gave up after 3 attempts"):
            s.edit(load_image(PHOTO), "portrait", policy="fixed-full")
    assert hang.held > 0  # the client gave up; the server never did
    shard_paths = Counter(r.path for r in proxy.shard_requests())
    assert max(shard_paths.values()) == FAST_RETRY.attempts


def test_a_server_that_is_down_is_a_transport_error(reference_model):
    from tests.edge_servers import free_port

    with EdgeSession(f"http://127.0.0.1:{free_port()}", models=lambda _: reference_model, retry=FAST_RETRY) as s:
        with pytest.raises(TransportError, match=f"after {FAST_RETRY.attempts} attempts"):
            s.edit(load_image(PHOTO), "portrait")


def test_client_errors_are_not_retried(proxy, reference_model):
    with session(proxy, reference_model) as s:
        with pytest.raises(ServerError) as err:
            s.manifest("portrait", 99)
    assert err.value.status == 404 and len(proxy.requests) == 1
