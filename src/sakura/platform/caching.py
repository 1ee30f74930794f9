"""One budgeted cache, for every tier that keeps bytes it may drop: a Serve replica's memory and
node-local disk tiers, its manifest cache, and the phone's shard cache.

:class:`Budget` is the bookkeeping they share: what each entry costs (bytes by default) and,
when a new one does not fit, which entries go, as an :class:`EvictionPolicy` chooses (registered
by name, as LMCache's storage backends take theirs: ``lru``, ``lfu`` and ``lfu-history`` here,
the phone's ``lru-template`` in :mod:`sakura.edge_client`).
:class:`MemoryCache` keeps values in memory, :class:`DiskCache` keeps files named by their
sha256 under a folder, written atomically and verified on every read (a disk can rot).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from sakura.platform.integrity import matches, read_regular, write_atomic

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class EvictionPolicy(Protocol[K]):
    """Orders a cache's entries (keys of type ``K``) for eviction."""

    def used(self, key: K) -> None:
        """``key`` was stored or read."""

    def forget(self, key: K) -> None:
        """``key`` left the cache."""

    def victims(self, incoming: K | None) -> Iterable[K]:
        """The entries that may go to make room for ``incoming`` (None: to get back under a
        smaller budget), first to go first; never ``incoming``, nor what the policy keeps for it."""


class LeastRecentlyUsed:
    def __init__(self) -> None:
        self._order: collections.OrderedDict[Hashable, None] = collections.OrderedDict()

    def used(self, key: Hashable) -> None:
        self._order[key] = None
        self._order.move_to_end(key)

    def forget(self, key: Hashable) -> None:
        self._order.pop(key, None)

    def victims(self, incoming: Hashable | None) -> list[Hashable]:
        return [key for key in self._order if key != incoming]


class LeastFrequentlyUsed:
    """Fewest uses first, the least recently used first among equals. ``remember``: an entry's
    uses are still counted after it left (perfect LFU: a popular entry evicted once comes back
    with its count); else it comes back as new (in-cache LFU)."""

    def __init__(self, *, remember: bool = False) -> None:
        self._remember = remember
        self._uses: collections.Counter[Hashable] = collections.Counter()
        self._cached: collections.OrderedDict[Hashable, None] = collections.OrderedDict()

    def used(self, key: Hashable) -> None:
        self._uses[key] += 1
        self._cached[key] = None
        self._cached.move_to_end(key)

    def forget(self, key: Hashable) -> None:
        self._cached.pop(key, None)
        if not self._remember:
            self._uses.pop(key, None)

    def victims(self, incoming: Hashable | None) -> list[Hashable]:
        recency = {key: i for i, key in enumerate(self._cached)}
        return sorted((key for key in self._cached if key != incoming), key=lambda key: (self._uses[key], recency[key]))


EVICTION_POLICIES: dict[str, Callable[[], EvictionPolicy[Any]]] = {
    "lru": LeastRecentlyUsed,
    "lfu": LeastFrequentlyUsed,
    "lfu-history": lambda: LeastFrequentlyUsed(remember=True),
}


def register_eviction(name: str, policy: Callable[[], EvictionPolicy[Any]]) -> None:
    EVICTION_POLICIES[name] = policy


class Budget(Generic[K]):
    """What a cache's entries cost against ``budget`` (not thread-safe: the caches lock).

    :meth:`admit` is the whole step for a cache whose evictions cannot fail. A cache whose can
    (files a disk refuses to delete) takes it apart: :meth:`plan` the victims, remove them and
    :meth:`drop` each one that went, then :meth:`add` the entry if it fits."""

    def __init__(self, budget: int, eviction: str = "lru") -> None:
        if budget < 0:
            raise ValueError("a cache budget is >= 0")
        self.budget, self.used = budget, 0
        self._costs: dict[K, int] = {}
        self._policy = EVICTION_POLICIES[eviction]()

    def __contains__(self, key: object) -> bool:
        return key in self._costs

    def __len__(self) -> int:
        return len(self._costs)

    def __iter__(self) -> Iterator[K]:
        return iter(list(self._costs))

    def cost(self, key: K) -> int:
        return self._costs.get(key, 0)

    def touch(self, key: K) -> bool:
        if key not in self._costs:
            return False
        self._policy.used(key)
        return True

    def fits(self, cost: int, *, freed: int = 0) -> bool:
        return self.used - freed + cost <= self.budget

    def plan(self, key: K | None, cost: int = 0, *, freed: int = 0) -> list[K] | None:
        """The entries to evict, in order, so that ``key`` fits at ``cost`` once ``freed`` more bytes
        go (``key``'s present cost always does); None if it cannot fit whatever goes. Changes nothing."""
        freed += self.cost(key) if key is not None else 0
        excess = self.used - freed + cost - self.budget
        victims: list[K] = []
        if excess <= 0:
            return victims  # it fits: the policy need not order anything (its order may cost I/O)
        for victim in self._policy.victims(key):
            if excess <= 0:
                break
            victims.append(victim)
            excess -= self._costs[victim]
        return victims if excess <= 0 else None

    def add(self, key: K, cost: int) -> None:
        """Account for ``key`` at ``cost`` (replacing what it cost before), evicting nothing."""
        self.drop(key)
        self._costs[key] = cost
        self.used += cost
        self._policy.used(key)

    def admit(self, key: K, cost: int) -> list[K] | None:
        """:meth:`add` after evicting what :meth:`plan` says; the entries evicted, or None if it can
        never fit (then nothing changes)."""
        victims = self.plan(key, cost)
        if victims is None:
            return None
        for victim in victims:
            self.drop(victim)
        self.add(key, cost)
        return victims

    def drop(self, key: K) -> None:
        if key in self._costs:
            self.used -= self._costs.pop(key)
            self._policy.forget(key)


class MemoryCache(Generic[K, V]):
    """Values in memory under a budget of ``cost(value)`` (bytes by default); thread-safe."""

    def __init__(self, budget: int, *, cost: Callable[[V], int] = len, eviction: str = "lru") -> None:  # type: ignore[assignment]
        self._budget: Budget[K] = Budget(budget, eviction)
        self._cost = cost
        self._items: dict[K, V] = {}
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        return self._budget.used

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K) -> V | None:
        with self._lock:
            return self._items[key] if self._budget.touch(key) else None

    def put(self, key: K, value: V) -> None:
        with self._lock:
            evicted = self._budget.admit(key, self._cost(value))
            if evicted is None:
                return
            self._items[key] = value
            for victim in evicted:
                del self._items[victim]

    def discard(self, key: K) -> None:
        with self._lock:
            self._budget.drop(key)
            self._items.pop(key, None)


class DiskCache:
    """Files named by their content's sha256 under ``root``, under a byte budget; what a previous
    process left there is adopted, oldest first in the eviction order."""

    def __init__(self, root: str | Path, budget: int, *, eviction: str = "lru") -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._budget: Budget[str] = Budget(budget, eviction)
        self._lock = threading.Lock()
        for path in sorted(self.root.glob("*.bin"), key=lambda p: p.stat().st_mtime):
            evicted = self._budget.admit(path.stem, path.stat().st_size)
            self._remove([path.stem] if evicted is None else evicted)

    @property
    def used(self) -> int:
        return self._budget.used

    def get(self, sha256: str, length: int) -> bytes | None:
        """The bytes named ``sha256`` if they are still the ``length`` bytes that hash to it: read
        no further than ``length + 1`` bytes, only from a regular file (a file grown since, or a
        link or FIFO swapped in, is dropped unread past that)."""
        with self._lock:
            if not self._budget.touch(sha256):
                return None
        try:
            data: bytes | None = read_regular(self._path(sha256), length, follow_links=False)
        except OSError:
            data = None
        if data is None or not matches(data, sha256, length):
            with self._lock:
                self._budget.drop(sha256)
            self._path(sha256).unlink(missing_ok=True)
            return None
        return data

    def put(self, sha256: str, data: bytes) -> None:
        if len(data) > self._budget.budget:
            return
        try:
            write_atomic(self._path(sha256), data, durable=False)  # a cache: a lost copy is fetched again
        except OSError:
            return
        with self._lock:
            evicted = self._budget.admit(sha256, len(data)) or []
        self._remove(evicted)

    def _remove(self, keys: list[str]) -> None:
        for key in keys:
            self._path(key).unlink(missing_ok=True)

    def _path(self, sha256: str) -> Path:
        return self.root / f"{sha256}.bin"
