"""Catalogue, manifests and shard bytes for the service, through the cache tiers.

A shard is read memory -> disk -> store (one ranged read of its payload); bytes from any lower
tier are checked against the manifest's sha256 before they are cached or returned. Alias lookups
are cached for ``alias_ttl_s``; so are numeric manifests, which are then revalidated (one
``head`` of the manifest) so a version that ``gc`` deleted stops being served.

"Not there" is a 404 only when the store could have had it: a store whose root (directory,
bucket) is gone is an outage (503), and an object a manifest lists but the store lacks is a
store fault (503), unless its version was deleted meanwhile (404). Answers never carry a store
path, URI or key: those go to the log (logger ``sakura.serve``).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from sakura.platform import layout
from sakura.platform.caching import DiskCache, MemoryCache
from sakura.platform.ids import validate_template_id
from sakura.platform.levelfile import ShardIntegrityError, verify_payload
from sakura.platform.library import (
    AliasUnreadable,
    LibraryError,
    ModelChange,
    TemplateLibrary,
    UnknownTemplate,
    VersionRetired,
)
from sakura.platform.manifest import ContextEntry, ImageEntry, Manifest, ShardLocation
from sakura.platform.store import NotFound, ObjectStore, RetryingStore, StoreError, TransientStoreError, open_store
from sakura.serve import errors
from sakura.serve.config import ServeConfig
from sakura.serve.metrics import ServeMetrics

log = logging.getLogger("sakura.serve")
#: How old the catalogue listing that unknown-template suggestions come from may be (an estimate:
#: a new template is suggested within a minute; a flood of typos costs one listing a minute).
KNOWN_IDS_TTL_S = 60.0


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


@dataclass(frozen=True)
class PhoneView:
    """A manifest as phones receive it (:meth:`Manifest.for_phone`), encoded once per load:
    plain JSON, the zstd frame phones ask for, that frame without the shards' sha256s
    (``?hashes=0``), and the shard hashes object that holds them."""

    json: bytes
    zstd: bytes
    unhashed: bytes
    hashes: bytes

    @classmethod
    def of(cls, manifest: Manifest) -> PhoneView:
        phone = manifest.for_phone()
        return cls(phone.to_json(), phone.to_wire(), phone.without_hashes().to_wire(), phone.shard_digests())


@dataclass
class _CachedManifest:
    checked: float  # time.monotonic() it was last known published
    manifest: Manifest
    phone: PhoneView | None = None  # encoded when a manifest route first asks (not for shard requests)


class ShardReader:
    def __init__(self, config: ServeConfig, metrics: ServeMetrics) -> None:
        self.config, self.metrics = config, metrics
        self._root = open_store(config.store, retry=None)  # probed read-only: never created, never retried
        self.library = TemplateLibrary(RetryingStore(self._root))
        self.memory: MemoryCache[str, bytes] = MemoryCache(config.memory_cache_bytes)
        self.disk = DiskCache(config.disk_cache_dir, config.disk_cache_bytes) if config.disk_cache_dir else None
        self._manifests: MemoryCache[tuple[str, int], _CachedManifest] = MemoryCache(
            config.manifest_cache_entries, cost=lambda _: 1)  # a budget of entries
        self._aliases: dict[tuple[str, str], tuple[float, int]] = {}
        self._root_seen: tuple[float, bool] | None = None
        self._known_ids: tuple[float, list[str]] | None = None
        self._lock = threading.Lock()

    # -- catalogue -----------------------------------------------------------------------
    def catalogue(self, after: str | None, limit: int) -> tuple[list[dict], str | None]:
        """One page: the templates after ``after`` that phones can use (those with an alias), and
        the id the next page starts after (None at the end). Costs one listing of at most
        ``limit + 1`` folders and one of each template's aliases, whatever the catalogue's size."""
        try:
            ids, last = self.library.template_page(after, limit)
            out = [{"id": t, "aliases": aliases} for t in ids if (aliases := self.library.aliases(t))]
        except NotFound as exc:  # S3 answers a listing of a missing bucket with a 404
            raise self._fault(exc) from None
        if not ids and after is None and not self._root_present():
            raise errors.store_outage()
        return out, last

    def versions(self, template_id: str) -> dict:
        validate_template_id(template_id)
        try:
            versions = self.library.versions(template_id)
            aliases = self.library.aliases(template_id) if versions else {}
        except NotFound as exc:
            raise self._fault(exc) from None
        if not versions:
            raise self._unknown(template_id)
        return {"id": template_id, "versions": versions, "aliases": aliases}

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
        try:
            version = self.library.resolve(template_id, ref)
        except UnknownTemplate:
            raise self._unknown(template_id) from None
        except LibraryError:
            raise self._missing(f"template {template_id!r} has no alias {ref!r}") from None
        with self._lock:
            self._aliases[(template_id, ref)] = (now, version)
        return version, True

    def manifest(self, template_id: str, version: int) -> Manifest:
        """A published manifest; a cached one is checked to still exist every ``alias_ttl_s``."""
        return self._cached(template_id, version).manifest

    def phone_manifest(self, template_id: str, version: int) -> tuple[Manifest, PhoneView]:
        """A published manifest and its phone-facing view."""
        cached = self._cached(template_id, version)
        if cached.phone is None:  # two racing requests may both encode it: same bytes, no harm
            cached.phone = PhoneView.of(cached.manifest)
        return cached.manifest, cached.phone

    def _cached(self, template_id: str, version: int) -> _CachedManifest:
        key, now = (template_id, version), time.monotonic()
        cached = self._manifests.get(key)
        if cached is not None:
            if now - cached.checked < self.config.alias_ttl_s:
                return cached
            if not self._still_published(template_id, version):
                raise self._gone(template_id, version)
            cached.checked = now
        else:
            try:
                manifest = self.library.manifest(template_id, version)
            except LibraryError:
                raise self._gone(template_id, version) from None
            cached = _CachedManifest(now, manifest)
        self._manifests.put(key, cached)
        return cached

    def _still_published(self, template_id: str, version: int) -> bool:
        """Whether a cached manifest is still in the store: one attempt, and True if the store
        cannot answer now (an outage must not stop cached versions being served)."""
        try:
            return self._root.head(layout.manifest_key(template_id, version)) is not None
        except TransientStoreError as exc:
            self.metrics.store_error("unavailable")
            log.warning("cannot revalidate %s v%s now, serving it from the cache: %s", template_id, version, exc)
            return True

    def forget_alias(self, template_id: str, alias: str) -> None:
        with self._lock:
            self._aliases.pop((template_id, alias), None)

    # -- shards --------------------------------------------------------------------------
    def locate(self, manifest: Manifest, index: int, level: str) -> ShardRef:
        entry = manifest.shard(index)
        level_entry = manifest.level(level)
        return ShardRef(self.library.level_store(level_entry), level_entry.key, entry.levels[level])

    def locate_object(self, entry: ContextEntry | ImageEntry) -> ShardRef:
        """A context or source object: a whole object in the library's own root."""
        whole = ShardLocation(row_group=0, row_group_offset=0, row_group_length=entry.length, offset=0,
                              length=entry.length, sha256=entry.sha256)
        return ShardRef(self.library.store, entry.key, whole)

    def shard(self, manifest: Manifest, index: int, level: str) -> Shard:
        return self.read(manifest, self.locate(manifest, index, level), f"#{index} {level}")

    def context(self, manifest: Manifest, name: str) -> Shard:
        return self.read(manifest, self.locate_object(manifest.context_object(name)), f"context {name}")

    def read(self, manifest: Manifest, ref: ShardRef, what: str) -> Shard:
        """A shard's or context object's bytes: memory, disk, then one ranged read of the store,
        checked against the manifest's sha256 before it is cached or served."""
        sha = ref.location.sha256
        data = self.memory.get(sha)
        if data is not None:
            self.metrics.tier_hit("memory")
            return Shard(data, sha, "memory")
        if self.disk is not None and (data := self.disk.get(sha, ref.location.length)) is not None:
            self.metrics.tier_hit("disk")
            self.memory.put(sha, data)
            return Shard(data, sha, "disk")
        try:
            data = ref.store.get(ref.key, (ref.location.offset, ref.location.offset + ref.location.length))
        except TransientStoreError:
            self.metrics.store_error("unavailable")
            raise
        except NotFound as exc:
            raise self._lost(manifest, exc) from None
        try:
            verify_payload(data, ref.location)
        except ShardIntegrityError:
            self.metrics.corrupt_shard()
            log.error("corrupt bytes %s v%s %s: bytes at %s do not match sha256 %s",
                      manifest.template_id, manifest.version, what, ref.key, sha)
            raise
        self.metrics.tier_hit("store")
        self.memory.put(sha, data)
        if self.disk is not None:
            self.disk.put(sha, data)
        return Shard(data, sha, "store")

    def set_alias(self, template_id: str, alias: str, version: int, *, force: bool = False,
                  allow_model_change: bool = False) -> None:
        """Point ``alias`` at ``version``; ``force`` overwrites an alias whose document is unreadable,
        ``allow_model_change`` moves it onto a version built for another model."""
        validate_template_id(template_id)
        layout.validate_alias(alias)
        try:
            self.library.set_alias(template_id, alias, version, force=force, allow_model_change=allow_model_change)
        except ModelChange as exc:
            log.info("alias %s of %s not moved: %s", alias, template_id, exc)
            raise errors.ApiError(409, "model_change", f"alias {alias!r} of {template_id!r} serves a version built "
                                  f"for another model than v{version}; send "
                                  '{"version": N, "allow_model_change": true} to move it anyway') from None
        except AliasUnreadable as exc:
            log.warning("alias %s of %s not moved: %s", alias, template_id, exc)
            raise errors.ApiError(409, "alias_unreadable", f"alias {alias!r} of {template_id!r} is unreadable; "
                                  'send {"version": N, "force": true} to overwrite it') from None
        except VersionRetired as exc:
            log.info("alias %s of %s not moved: %s", alias, template_id, exc)
            raise errors.ApiError(409, "version_retired", f"version {version} of {template_id!r} is being deleted "
                                  "by gc; point the alias at another version") from None
        except LibraryError as exc:
            log.info("alias %s of %s not moved to v%s: %s", alias, template_id, version, exc)
            raise self._missing(f"template {template_id!r} has no published version {version}") from None
        finally:
            self.forget_alias(template_id, alias)

    # -- store faults --------------------------------------------------------------------
    def _root_present(self) -> bool:
        """Whether the store's root exists (cached for ``alias_ttl_s``; asked only when something is missing)."""
        now = time.monotonic()
        with self._lock:
            seen = self._root_seen
        if seen is not None and now - seen[0] < self.config.alias_ttl_s:
            return seen[1]
        try:
            present = self._root.root_exists()
        except StoreError as exc:
            log.error("store %s cannot be probed: %s", self._root.uri, exc)
            present = False
        if not present:
            log.error("store root %s does not exist or cannot be read: answering 503", self._root.uri)
        with self._lock:
            self._root_seen = (now, present)
        return present

    def _missing(self, message: str) -> errors.ApiError:
        """A 404 for what the library lacks, unless the store's root is gone (an outage)."""
        return errors.not_found(message) if self._root_present() else errors.store_outage()

    def _unknown(self, template_id: str) -> errors.ApiError:
        """A 404 ``unknown_template`` naming the closest published ids (from a catalogue listing
        at most every ``KNOWN_IDS_TTL_S``: a typo never costs a listing per request)."""
        if not self._root_present():
            return errors.store_outage()
        now = time.monotonic()
        with self._lock:
            known = self._known_ids
        if known is None or now - known[0] >= KNOWN_IDS_TTL_S:
            try:
                known = (now, self.library.template_ids())
            except StoreError as exc:
                log.warning("no suggestions for %r: the catalogue cannot be listed: %s", template_id, exc)
                known = (now, [])
            with self._lock:
                self._known_ids = known
        return errors.ApiError(404, "unknown_template", str(UnknownTemplate(template_id).suggest(known[1])))

    def _gone(self, template_id: str, version: int) -> errors.ApiError:
        """The version's manifest is not in the store: forget it and everything resolved to it."""
        with self._lock:
            self._manifests.discard((template_id, version))
            for key in [k for k, (_, v) in self._aliases.items() if k[0] == template_id and v == version]:
                del self._aliases[key]
        return self._missing(f"template {template_id!r} has no version {version}")

    def _lost(self, manifest: Manifest, exc: NotFound) -> errors.ApiError:
        """A level file is missing: its version was deleted (404), or the store lost it (503)."""
        if self.library.store.head(layout.manifest_key(manifest.template_id, manifest.version)) is None:
            return self._gone(manifest.template_id, manifest.version)
        return self._fault(exc)

    def _fault(self, exc: StoreError) -> errors.ApiError:
        self.metrics.store_error("missing")
        if not self._root_present():
            return errors.store_outage()
        log.error("store fault: %s", exc)
        return errors.store_fault()
