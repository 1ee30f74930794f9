"""A template library in an object store: versions, manifests, aliases, publishing, gc.

Publishing protocol (crash-safe at every point):

1. claim a version number with a create-only ``claim.json`` (numbers are never reused, and two
   concurrent builds can never take the same one);
2. write the level files (each to its tier) and the importance scores;
3. write ``manifest.json`` create-only: the version becomes visible, complete, at this instant;
4. move the ``latest`` alias forward by compare-and-swap.

A crash before 3 leaves an invisible orphan that :meth:`TemplateLibrary.clean_orphans` removes.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from sakura.platform import layout
from sakura.platform.errors import SakuraError
from sakura.platform.manifest import AliasDoc, Manifest, ManifestError
from sakura.platform.store import AlreadyExists, NotFound, ObjectStore, PreconditionFailed, open_store

LATEST = "latest"
ORPHAN_GRACE_S = 3600.0


class LibraryError(SakuraError, LookupError):
    code = "not_found"


@dataclass(frozen=True)
class Claim:
    version: int
    content_hash: str
    created_at: float


class TemplateLibrary:
    def __init__(self, store: ObjectStore, tiers: dict[str, ObjectStore] | None = None) -> None:
        self.store = store
        self.tiers = dict(tiers or {})

    def tier(self, level: str) -> ObjectStore:
        return self.tiers.get(level, self.store)

    # -- reading -------------------------------------------------------------------------
    def templates(self) -> list[str]:
        ids = set()
        for obj in self.store.list("templates/"):
            parts = obj.key.split("/")
            if len(parts) >= 3 and parts[-1] == "manifest.json":
                ids.add(parts[1])
        return sorted(ids)

    def versions(self, template_id: str) -> list[int]:
        """Published versions (those whose manifest exists), ascending."""
        found = []
        for obj in self.store.list(layout.versions_prefix(template_id)):
            parsed = layout.parse_version_key(obj.key)
            if parsed and parsed[2] == "manifest.json":
                found.append(parsed[1])
        return sorted(found)

    def aliases(self, template_id: str) -> dict[str, int]:
        out = {}
        prefix = layout.template_prefix(template_id) + "aliases/"
        for obj in self.store.list(prefix):
            name = obj.key[len(prefix):].removesuffix(".json")
            try:
                out[name] = AliasDoc.from_bytes(self.store.get(obj.key)).version
            except (NotFound, ManifestError):
                continue
        return out

    def resolve(self, template_id: str, ref: int | str) -> int:
        """A numeric version, a version string, or an alias -> the version number."""
        number = layout.version_ref(ref)
        if number is not None:
            return number
        try:
            return AliasDoc.from_bytes(self.store.get(layout.alias_key(template_id, ref))).version
        except NotFound:
            raise LibraryError(f"template {template_id!r} has no alias {ref!r}") from None

    def manifest(self, template_id: str, ref: int | str = LATEST) -> Manifest:
        version = self.resolve(template_id, ref)
        try:
            manifest = Manifest.from_bytes(self.store.get(layout.manifest_key(template_id, version)))
        except NotFound:
            raise LibraryError(f"template {template_id!r} has no version {version}") from None
        if manifest.template_id != template_id or manifest.version != version:
            raise ManifestError(f"manifest at {template_id} v{version} describes {manifest.template_id} v{manifest.version}")
        return manifest

    def find_by_hash(self, template_id: str, content_hash: str) -> int | None:
        for version in reversed(self.versions(template_id)):
            try:
                if self.manifest(template_id, version).content_hash == content_hash:
                    return version
            except (LibraryError, ManifestError):
                continue
        return None

    # -- writing -------------------------------------------------------------------------
    def claim_version(self, template_id: str, content_hash: str) -> int:
        """Reserve the next unused version number (create-only, so concurrent builds never collide)."""
        taken = [layout.parse_version_key(o.key) for o in self.store.list(layout.versions_prefix(template_id))]
        version = max((p[1] for p in taken if p), default=0) + 1
        body = json.dumps({"content_hash": content_hash, "created_at": time.time()}).encode()
        while True:
            try:
                self.store.put_if_absent(layout.claim_key(template_id, version), body)
                return version
            except AlreadyExists:
                version += 1

    def publish(self, manifest: Manifest) -> None:
        """Make a version visible (create-only manifest), then move ``latest`` forward."""
        self.store.put_if_absent(layout.manifest_key(manifest.template_id, manifest.version), manifest.to_bytes())
        self.advance_alias(manifest.template_id, LATEST, manifest.version)

    def advance_alias(self, template_id: str, alias: str, version: int) -> None:
        """Point ``alias`` at ``version`` unless it already points at a newer one (CAS loop)."""
        self._swap_alias(template_id, alias, lambda current: current is None or current < version, version)

    def set_alias(self, template_id: str, alias: str, version: int) -> None:
        """Point ``alias`` at a published version (pin or roll back)."""
        layout.validate_alias(alias)
        if version not in self.versions(template_id):
            raise LibraryError(f"template {template_id!r} has no published version {version}")
        self._swap_alias(template_id, alias, lambda current: current != version, version)

    def _swap_alias(self, template_id: str, alias: str, should_move, version: int) -> None:
        key = layout.alias_key(template_id, alias)
        while True:
            try:
                data, etag = self.store.get_with_etag(key)
                current: int | None = AliasDoc.from_bytes(data).version
            except NotFound:
                etag, current = None, None
            if not should_move(current):
                return
            try:
                self.store.swap(key, AliasDoc(version=version).to_bytes(), etag)
                return
            except (PreconditionFailed, AlreadyExists):
                continue  # somebody moved it meanwhile: re-read and decide again

    # -- cleaning ------------------------------------------------------------------------
    def claims(self, template_id: str) -> list[Claim]:
        out = []
        for obj in self.store.list(layout.versions_prefix(template_id)):
            parsed = layout.parse_version_key(obj.key)
            if parsed and parsed[2] == "claim.json":
                try:
                    raw = json.loads(self.store.get(obj.key))
                    out.append(Claim(parsed[1], str(raw.get("content_hash", "")), float(raw.get("created_at", 0))))
                except (NotFound, ValueError):
                    continue
        return out

    def clean_orphans(self, template_id: str, *, grace_s: float = ORPHAN_GRACE_S, levels: list[str] = ()) -> list[int]:
        """Delete claimed-but-unpublished versions older than ``grace_s`` (crashed builds)."""
        published = set(self.versions(template_id))
        now, removed = time.time(), []
        for claim in self.claims(template_id):
            if claim.version not in published and now - claim.created_at >= grace_s:
                self._delete_files(template_id, claim.version, [(lv, self.tier(lv)) for lv in levels])
                removed.append(claim.version)
        return removed

    def gc(self, template_id: str, keep: int) -> list[int]:
        """Delete published versions beyond the newest ``keep``, never one an alias points to."""
        if keep < 1:
            raise LibraryError("gc must keep at least one version")
        versions = self.versions(template_id)
        pinned = set(self.aliases(template_id).values())
        doomed = [v for v in versions[:-keep] if v not in pinned]
        for version in doomed:
            manifest = self.manifest(template_id, version)
            self.store.delete(layout.manifest_key(template_id, version))  # invisible first
            self._delete_files(template_id, version, [
                (lv.name, open_store(lv.store) if lv.store else self.tier(lv.name)) for lv in manifest.levels])
        return doomed

    def _delete_files(self, template_id: str, version: int, levels: list[tuple[str, ObjectStore]]) -> None:
        """Delete a version's level files (each from its tier) and whatever else is under it."""
        for level, store in levels:
            store.delete(layout.level_key(template_id, version, level))
        for obj in list(self.store.list(layout.version_prefix(template_id, version))):
            if not obj.key.endswith("manifest.json"):
                self.store.delete(obj.key)
