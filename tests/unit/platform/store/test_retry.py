from __future__ import annotations

import pytest

from sakura.platform.store import NotFound, RetryingStore, RetryPolicy, TransientStoreError, open_store


class Flaky:
    """Fails ``failures`` times with ``error``, then delegates."""

    def __init__(self, inner, failures: int, error: Exception) -> None:
        self.inner, self.failures, self.error, self.calls = inner, failures, error, 0
        self.uri = inner.uri

    def get(self, key, byte_range=None):
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return self.inner.get(key, byte_range)


def test_transient_errors_are_retried_with_growing_backoff(tmp_path):
    local = open_store(str(tmp_path), retry=None)
    local.put("k", b"v")
    sleeps: list[float] = []
    flaky = Flaky(local, 3, TransientStoreError("503"))
    store = RetryingStore(flaky, RetryPolicy(attempts=5, backoff_s=0.1), sleep=sleeps.append)
    assert store.get("k") == b"v" and flaky.calls == 4
    assert len(sleeps) == 3 and 0.075 <= sleeps[0] <= 0.125 and 0.3 <= sleeps[2] <= 0.5  # 0.1, 0.2, 0.4 +-25%


def test_retries_give_up_and_permanent_errors_pass_at_once(tmp_path):
    local = open_store(str(tmp_path), retry=None)
    local.put("k", b"v")
    always = Flaky(local, 99, TransientStoreError("down"))
    with pytest.raises(TransientStoreError):
        RetryingStore(always, RetryPolicy(attempts=3), sleep=lambda s: None).get("k")
    assert always.calls == 3
    missing = Flaky(local, 99, NotFound("gone"))
    with pytest.raises(NotFound):
        RetryingStore(missing, RetryPolicy(attempts=3), sleep=lambda s: None).get("k")
    assert missing.calls == 1
