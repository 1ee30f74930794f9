"""Synthetic versions for library-protocol tests (real stores, real manifests, no model), and a
store wrapper that injects faults at exact points."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import replace

from sakura.platform import layout
from sakura.platform.library import TemplateLibrary
from sakura.platform.manifest import LevelEntry, Manifest, ModelRef, ScheduleRef, ShardEntry, ShardLocation, TokenLayout
from sakura.platform.store import ObjectInfo, ObjectStore
from sakura.platform.version_state import move_claim

LEVEL = "compact"


def level_bytes(template_id: str, version: int) -> bytes:
    return f"level file of {template_id} v{version}".encode()


def synthetic_manifest(template_id: str, version: int, content_hash: str = "c" * 64) -> Manifest:
    data = level_bytes(template_id, version)
    location = ShardLocation(row_group=0, row_group_offset=0, row_group_length=len(data), offset=0, length=len(data),
                             sha256=hashlib.sha256(data).hexdigest())
    return Manifest(
        template_id=template_id, version=version, task="try_on", prompt="p", resolution=32, content_hash=content_hash,
        created_at="2026-01-01T00:00:00+00:00",
        model=ModelRef(name="m", family="f", fingerprint="f" * 64, layers=1, heads=1, head_dim=1, step_dependent=False),
        schedule=ScheduleRef(steps=1, strength=1.0), tokens=TokenLayout(template=1, image=1, text=1), kv_bytes_fp16=1,
        levels=[LevelEntry(name=LEVEL, key=layout.level_key(template_id, version, LEVEL), bytes=len(data), spec={})],
        shards=[ShardEntry(index=0, layer=0, shape=(1, 1, 1), levels={LEVEL: location})],
    )


def build_files(library: TemplateLibrary, template_id: str, content_hash: str = "c" * 64) -> Manifest:
    """Claim the next version and write its level file: the state just before publishing."""
    version = library.claim_version(template_id, content_hash)
    library.store.put_if_absent(layout.level_key(template_id, version, LEVEL), level_bytes(template_id, version))
    return synthetic_manifest(template_id, version, content_hash)


def put_version(library: TemplateLibrary, template_id: str, content_hash: str = "c" * 64) -> int:
    """Claim, write and publish the next version; ``latest`` moves to it."""
    manifest = build_files(library, template_id, content_hash)
    library.publish(manifest)
    return manifest.version


def age_claim(store: ObjectStore, template_id: str, version: int, seconds: float) -> None:
    """Make a claim look ``seconds`` old (its lease taken that long ago): a move of its log."""
    move_claim(store, template_id, version, lambda c: replace(c, created_at=time.time() - seconds, renewed_at=0.0))


def tombstones(store: ObjectStore, template_id: str, version: int) -> set[str]:
    """The names left under a version (each log's folder for its records), checking that its
    claim's record 1, which keeps the number taken, is among them."""
    prefix = layout.version_prefix(template_id, version)
    keys = [o.key for o in store.list(prefix)]
    assert layout.claim_prefix(template_id, version) + "000000000001.json" in keys, keys
    return {key[len(prefix):].split("/")[0] for key in keys}


def check_aliases(library: TemplateLibrary, template_id: str) -> dict[str, int]:
    """Every alias points at a version whose manifest and level file exist."""
    aliases = library.aliases(template_id)
    for alias, version in aliases.items():
        manifest = library.manifest(template_id, version)  # raises if gone
        assert library.store.head(manifest.levels[0].key) is not None, (alias, version, "level file deleted")
    return aliases


class Faulty(ObjectStore):
    """Delegates to ``inner``; ``hook(op, key)`` runs before each write (it may raise or act as a
    concurrent writer), and ``after(op, key)`` after a write has landed (raise there: a lost reply
    or a crash right after the write)."""

    def __init__(self, inner: ObjectStore, *, hook: Callable[[str, str], None] = lambda op, key: None,
                 after: Callable[[str, str], None] = lambda op, key: None) -> None:
        self.inner, self.hook, self.after = inner, hook, after
        self.uri = inner.uri

    def _write(self, op: str, key: str, fn: Callable[[], ObjectInfo]) -> ObjectInfo:
        self.hook(op, key)
        info = fn()
        self.after(op, key)
        return info

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        return self.inner.get(key, byte_range)

    def head(self, key: str) -> ObjectInfo | None:
        return self.inner.head(key)

    def put(self, key: str, data: bytes) -> ObjectInfo:
        return self._write("put", key, lambda: self.inner.put(key, data))

    def put_if_absent(self, key: str, data: bytes) -> ObjectInfo:
        return self._write("put_if_absent", key, lambda: self.inner.put_if_absent(key, data))

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        return self.inner.list(prefix)

    def delete(self, key: str) -> None:
        self.hook("delete", key)
        self.inner.delete(key)
