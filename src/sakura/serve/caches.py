"""The replica's cache tiers: memory (LRU, byte budget) and node-local disk (LRU, byte budget).

Both hold only bytes that were already verified against the manifest's sha256; the disk tier
re-verifies on read (a disk can rot), and names entries by that sha256.
"""

from __future__ import annotations

import collections
import hashlib
import os
import tempfile
import threading
from pathlib import Path


class MemoryLRU:
    def __init__(self, budget_bytes: int) -> None:
        self.budget = budget_bytes
        self.used = 0
        self._items: collections.OrderedDict[str, bytes] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes | None:
        with self._lock:
            data = self._items.get(key)
            if data is not None:
                self._items.move_to_end(key)
            return data

    def put(self, key: str, data: bytes) -> None:
        if len(data) > self.budget:
            return
        with self._lock:
            old = self._items.pop(key, None)
            self.used -= len(old) if old is not None else 0
            self._items[key] = data
            self.used += len(data)
            while self.used > self.budget:
                _, evicted = self._items.popitem(last=False)
                self.used -= len(evicted)


class DiskLRU:
    """Files named by content sha256 under ``root``; eviction by least recent use."""

    def __init__(self, root: str | Path, budget_bytes: int) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.budget = budget_bytes
        self._sizes: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._lock = threading.Lock()
        for path in sorted(self.root.glob("*.bin"), key=lambda p: p.stat().st_mtime):
            self._sizes[path.stem] = path.stat().st_size
        self.used = sum(self._sizes.values())
        self._evict()

    def get(self, sha256: str) -> bytes | None:
        with self._lock:
            if sha256 not in self._sizes:
                return None
            self._sizes.move_to_end(sha256)
        try:
            data = (self.root / f"{sha256}.bin").read_bytes()
        except OSError:
            self._forget(sha256)
            return None
        if hashlib.sha256(data).hexdigest() != sha256:
            self._forget(sha256)
            return None
        return data

    def put(self, sha256: str, data: bytes) -> None:
        if len(data) > self.budget:
            return
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, self.root / f"{sha256}.bin")
        except OSError:
            if os.path.exists(tmp):
                os.unlink(tmp)
            return
        with self._lock:
            self.used += len(data) - self._sizes.pop(sha256, 0)
            self._sizes[sha256] = len(data)
            self._evict()

    def _forget(self, sha256: str) -> None:
        with self._lock:
            self.used -= self._sizes.pop(sha256, 0)
        (self.root / f"{sha256}.bin").unlink(missing_ok=True)

    def _evict(self) -> None:
        while self.used > self.budget and self._sizes:
            victim, size = self._sizes.popitem(last=False)
            self.used -= size
            (self.root / f"{victim}.bin").unlink(missing_ok=True)
