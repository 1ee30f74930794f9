"""Retries with exponential backoff and jitter, as a wrapper around any store."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from sakura.platform.retry import RetryPolicy
from sakura.platform.store.base import ObjectInfo, ObjectStore, TransientStoreError

T = TypeVar("T")


class RetryingStore(ObjectStore):
    """Retries :class:`TransientStoreError`; every other error passes through at once.

    Create-only writes are retried too: if a first attempt landed but its answer was lost, the
    retry reports AlreadyExists, which callers already handle by re-reading.
    """

    def __init__(self, inner: ObjectStore, policy: RetryPolicy = RetryPolicy(),
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.inner, self.policy, self._sleep = inner, policy, sleep
        self.uri = inner.uri

    def __getattr__(self, name: str) -> Any:  # extras such as presigned_url
        return getattr(self.inner, name)

    def _call(self, fn: Callable[[], T]) -> T:
        for delay in self.policy.delays():
            try:
                return fn()
            except TransientStoreError:
                self._sleep(delay)
        return fn()

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        return self._call(lambda: self.inner.get(key, byte_range))

    def head(self, key: str) -> ObjectInfo | None:
        return self._call(lambda: self.inner.head(key))

    def put(self, key: str, data: bytes) -> ObjectInfo:
        return self._call(lambda: self.inner.put(key, data))

    def put_if_absent(self, key: str, data: bytes) -> ObjectInfo:
        return self._call(lambda: self.inner.put_if_absent(key, data))

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        return iter(self._call(lambda: list(self.inner.list(prefix))))

    def list_folders(self, prefix: str, *, after: str = "", limit: int = 1000) -> Sequence[str]:
        return self._call(lambda: self.inner.list_folders(prefix, after=after, limit=limit))

    def delete(self, key: str) -> None:
        self._call(lambda: self.inner.delete(key))

    def check_reachable(self) -> None:
        self._call(self.inner.check_reachable)

    def root_exists(self) -> bool:
        return self._call(self.inner.root_exists)
