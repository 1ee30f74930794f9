"""Catalogue, manifests and shard bytes for the service, through the cache tiers.

Numeric versions are immutable, so their manifests are cached for good; alias lookups are
cached for ``alias_ttl_s``. A shard is read memory -> disk -> store (one ranged read of its
payload); bytes from any lower tier are checked against the manifest's sha256 before they are
cached or returned.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass

from sakura.platform import layout
from sakura.platform.ids import validate_template_id
from sakura.platform.levelfile import ShardIntegrityError, verify_payload
from sakura.platform.library import LibraryError, TemplateLibrary
from sakura.platform.manifest import Manifest, ShardLocation
from sakura.platform.store import ObjectStore, TransientStoreError, open_store
from sakura.serve.caches import DiskLRU, MemoryLRU
from sakura.serve.config import ServeConfig
from sakura.serve.metrics import ServeMetrics

log = logging.getLogger("sakura.serve")


@dataclass(frozen=True)
class Shard:
    data: bytes
    sha256: str
    tier: str


@dataclass(frozen=True)
class ShardRef:
    """Where a shard's bytes live (for redirect mode)."""

    store: ObjectStore
    key: str
    location: ShardLocation


class ShardReader:
    def __init__(self, config: ServeConfig, metrics: ServeMetrics) -> None:
        self.config, self.metrics = config, metrics
        self.library = TemplateLibrary(open_store(config.store))
        self._stores: dict[str, ObjectStore] = {config.store: self.library.store}
        self.memory = MemoryLRU(config.memory_cache_bytes)
        self.disk = DiskLRU(config.disk_cache_dir, config.disk_cache_bytes) if config.disk_cache_dir else None
        self._manifests: collections.OrderedDict[tuple[str, int], Manifest] = collections.OrderedDict()
        self._aliases: dict[tuple[str, str], tuple[float, int]] = {}
        self._lock = threading.Lock()

    # -- catalogue -----------------------------------------------------------------------
    def catalogue(self) -> list[dict]:
        return [{"id": t, "aliases": self.library.aliases(t)} for t in self.library.templates()]

    def versions(self, template_id: str) -> dict:
        versions = self.library.versions(validate_template_id(template_id))
        if not versions:
            raise LibraryError(f"unknown template {template_id!r}")
        return {"id": template_id, "versions": versions, "aliases": self.library.aliases(template_id)}

    # -- manifests -----------------------------------------------------------------------
    def resolve(self, template_id: str, ref: str) -> tuple[int, bool]:
        """The version a reference names, and whether it was an alias."""
        validate_template_id(template_id)
        number = layout.version_ref(ref)
        if number is not None:
            return number, False
        now = time.monotonic()
        with self._lock:
            cached = self._aliases.get((template_id, ref))
        if cached and now - cached[0] < self.config.alias_ttl_s:
            return cached[1], True
        version = self.library.resolve(template_id, ref)
        with self._lock:
            self._aliases[(template_id, ref)] = (now, version)
        return version, True

    def manifest(self, template_id: str, version: int) -> Manifest:
        key = (template_id, version)
        with self._lock:
            if key in self._manifests:
                self._manifests.move_to_end(key)
                return self._manifests[key]
        manifest = self.library.manifest(template_id, version)
        with self._lock:
            self._manifests[key] = manifest
            while len(self._manifests) > self.config.manifest_cache_entries:
                self._manifests.popitem(last=False)
        return manifest

    def forget_alias(self, template_id: str, alias: str) -> None:
        with self._lock:
            self._aliases.pop((template_id, alias), None)

    # -- shards --------------------------------------------------------------------------
    def locate(self, manifest: Manifest, index: int, level: str) -> ShardRef:
        entry = manifest.shard(index)
        level_entry = manifest.level(level)
        return ShardRef(self._store(level_entry.store or self.config.store), level_entry.key, entry.levels[level])

    def shard(self, manifest: Manifest, index: int, level: str) -> Shard:
        ref = self.locate(manifest, index, level)
        sha = ref.location.sha256
        data = self.memory.get(sha)
        if data is not None:
            self.metrics.tier_hits.labels("memory").inc()
            return Shard(data, sha, "memory")
        if self.disk is not None and (data := self.disk.get(sha)) is not None:
            self.metrics.tier_hits.labels("disk").inc()
            self.memory.put(sha, data)
            return Shard(data, sha, "disk")
        try:
            data = ref.store.get(ref.key, (ref.location.offset, ref.location.offset + ref.location.length))
        except TransientStoreError:
            self.metrics.store_errors.labels("unavailable").inc()
            raise
        try:
            verify_payload(data, ref.location)
        except ShardIntegrityError:
            self.metrics.corrupt.inc()
            log.error("corrupt shard %s v%s #%s %s: bytes at %s do not match sha256 %s",
                      manifest.template_id, manifest.version, index, level, ref.key, sha)
            raise
        self.metrics.tier_hits.labels("store").inc()
        self.memory.put(sha, data)
        if self.disk is not None:
            self.disk.put(sha, data)
        return Shard(data, sha, "store")

    def set_alias(self, template_id: str, alias: str, version: int) -> None:
        self.library.set_alias(validate_template_id(template_id), layout.validate_alias(alias), version)
        self.forget_alias(template_id, alias)

    def _store(self, uri: str) -> ObjectStore:
        with self._lock:
            if uri not in self._stores:
                self._stores[uri] = open_store(uri)
            return self._stores[uri]
