"""Each shard's sha256 at each level, which every fetched or kept shard is checked against.

A manifest lists them, unless the phone asked for it without them (``?hashes=0``: a phone that may
compute every block itself, for which they would be most of a per-step model's manifest, and
incompressible). Then they come as one more object (``PhoneManifest.shard_hashes``), loaded the
first time a shard is fetched or read back from the cache, and checked before any shard is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from sakura.platform.manifest import ManifestError, PhoneManifest


class ShardHashes:
    def __init__(self, manifest: PhoneManifest, load: Callable[[], bytes] | None = None, *, kept: bool = False) -> None:
        """``load``: the shard hashes object's bytes, verified (needed only when ``manifest`` lacks
        them); ``kept``: it reads them from the phone's cache, not the link."""
        if not manifest.hashed and load is None:
            raise ManifestError(f"{manifest.template_id} v{manifest.version} came without its shards' sha256s")
        self._manifest, self._load, self._kept = manifest, load, kept
        self._lock = threading.Lock()

    @property
    def pending_bytes(self) -> int:
        """What the link must still bring before a shard can be checked (the planner's
        ``PlanContext.hashes_bytes``): the shard hashes object, 0 once on the phone."""
        ref = self._manifest.shard_hashes
        return 0 if self._manifest.hashed or self._kept or ref is None else ref.length

    def sha256(self, index: int, level: str) -> str:
        with self._lock:
            if not self._manifest.hashed and self._load is not None:
                self._manifest = self._manifest.with_hashes(self._load())
        sha = self._manifest.shard(index).levels[level].sha256
        assert sha is not None  # with_hashes filled every one
        return sha
