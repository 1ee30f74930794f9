"""gc and orphan cleanup of a :class:`~sakura.platform.library.TemplateLibrary` (whose docstring
gives the protocols: retirement marks, claims, and why no alias ends on a deleted version).

Each version deleted keeps its tombstones: its claim's log (the number is never handed out
again) and its retirement mark's log (no alias moves onto it again); the legacy ``claim.json`` /
``retired.json`` of versions from before the logs too.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from dataclasses import replace
from typing import Protocol

from sakura.platform import alias_log, layout
from sakura.platform.errors import LibraryError
from sakura.platform.manifest import AliasDoc, Manifest, ManifestError
from sakura.platform.store import ObjectStore
from sakura.platform.version_state import (
    ABANDONED,
    BUILDING,
    REINSTATED,
    ClaimAbandoned,
    begin_deleting,
    mark_state,
    move_claim,
    reinstate,
    retire,
)


class TemplateLibrary(Protocol):
    """What gc and orphan cleanup need of :class:`sakura.platform.library.TemplateLibrary` (a
    protocol, so that the library can call in here without the two importing each other)."""

    store: ObjectStore
    tiers: dict[str, ObjectStore]

    def tier(self, level: str) -> ObjectStore: ...

    def versions(self, template_id: str) -> list[int]: ...

    def manifest(self, template_id: str, ref: int | str = ...) -> Manifest: ...

    def _scan(self, template_id: str) -> dict[int, set[str]]: ...

    def _open(self, uri: str) -> ObjectStore: ...

__all__ = ["clean_orphans", "gc", "gc_candidates"]

_MANIFEST = "manifest.json"
log = logging.getLogger("sakura.library")


def gc(library: TemplateLibrary, template_id: str, keep: int, grace_s: float) -> list[int]:
    """:meth:`TemplateLibrary.gc <sakura.platform.library.TemplateLibrary.gc>`."""
    _check_keep(keep)
    store = library.store
    scan = library._scan(template_id)
    pinned = _targets(template_id, _settle_aliases(library, template_id, scan))
    if pinned is None:
        return []
    published = sorted(v for v, names in scan.items() if _MANIFEST in names)
    doomed = _doomed(published, pinned, keep)
    for version in published:
        if version not in doomed and _has_mark(scan[version]):
            reinstate(store, template_id, version)
    for version in doomed:
        retire(store, template_id, version)
    pinned = _alias_targets(library, template_id) if doomed else set()  # again, after marking
    deleted: list[int] = []
    for version in doomed if pinned is not None else []:
        if pinned is not None and version in pinned:
            reinstate(store, template_id, version)
        elif _collect(library, template_id, version, grace_s):
            deleted.append(version)
    for version, names in scan.items():  # finish deletions that a crashed or concurrent gc began
        if _has_mark(names) and _MANIFEST not in names and _files(names):
            _collect(library, template_id, version, grace_s)
    return deleted


def gc_candidates(library: TemplateLibrary, template_id: str, keep: int) -> list[int]:
    """:meth:`TemplateLibrary.gc_candidates <sakura.platform.library.TemplateLibrary.gc_candidates>`."""
    _check_keep(keep)
    pinned = _alias_targets(library, template_id)
    return [] if pinned is None else _doomed(library.versions(template_id), pinned, keep)


def retired(library: TemplateLibrary, template_id: str) -> list[int]:
    """:meth:`TemplateLibrary.retired <sakura.platform.library.TemplateLibrary.retired>`."""
    return [v for v, names in sorted(library._scan(template_id).items())
            if _MANIFEST in names and _has_mark(names) and mark_state(library.store, template_id, v) != REINSTATED]


def clean_orphans(library: TemplateLibrary, template_id: str, grace_s: float, levels: Iterable[str]) -> list[int]:
    """:meth:`TemplateLibrary.clean_orphans <sakura.platform.library.TemplateLibrary.clean_orphans>`."""
    extra = [(lv, None) for lv in levels if lv in library.tiers]
    removed = []
    for version, names in sorted(library._scan(template_id).items()):
        if not _has_claim(names) or _MANIFEST in names or _has_mark(names):
            continue
        try:
            claim = move_claim(library.store, template_id, version, lambda c: replace(c, state=ABANDONED)
                               if c.state == BUILDING and c.age_s >= grace_s else None)
        except (ManifestError, ClaimAbandoned):
            continue  # unreadable or gone: leave it
        if claim.state == ABANDONED and (_files(names) or claim.tiers or extra):
            _erase(library, template_id, version, [*extra, *claim.tiers.items()])
            removed.append(version)
    return removed


def _settle_aliases(library: TemplateLibrary, template_id: str, scan: dict[int, set[str]]) -> dict[str, bytes]:
    """Undo the moves of aliases onto versions gc is deleting whose movers died before they could
    (:func:`~sakura.platform.alias_log.settle`); only versions with a mark are read. The aliases'
    newest records afterwards (read again only if one was undone)."""
    heads = alias_log.heads(library.store, template_id)
    settled = False
    for name, data in heads.items():
        with contextlib.suppress(ManifestError):
            if _has_mark(scan.get(AliasDoc.from_bytes(data).version, set())):
                alias_log.settle(library.store, template_id, name)
                settled = True
    return alias_log.heads(library.store, template_id) if settled else heads


def _alias_targets(library: TemplateLibrary, template_id: str) -> set[int] | None:
    """Versions some alias points at; None if an alias is unreadable (it may point anywhere)."""
    return _targets(template_id, alias_log.heads(library.store, template_id))


def _targets(template_id: str, heads: dict[str, bytes]) -> set[int] | None:
    """The versions the aliases' newest records ``heads`` point at; None if one is unreadable."""
    out = set()
    for name, data in heads.items():
        try:
            out.add(AliasDoc.from_bytes(data).version)
        except ManifestError:
            log.warning("gc: alias %r is unreadable; %r keeps every version until it is repaired",
                        name, template_id)
            return None
    return out


def _collect(library: TemplateLibrary, template_id: str, version: int, grace_s: float) -> bool:
    """Delete a version whose mark is ``deleting``, or ``retired`` for ``grace_s``, unless aliased."""
    def levels() -> tuple[tuple[str, str | None], ...] | None:
        try:
            return tuple((lv.name, lv.store) for lv in library.manifest(template_id, version).levels)
        except (LibraryError, ManifestError):
            return None

    mark = begin_deleting(library.store, template_id, version, grace_s, levels)
    if mark is None:
        return False
    pinned = _alias_targets(library, template_id)
    if pinned is None or version in pinned:
        log.warning("gc: %s v%d was aliased as gc began deleting it; kept while an alias points at it",
                    template_id, version)
        return False
    library.store.delete(layout.manifest_key(template_id, version))  # invisible first
    _erase(library, template_id, version, mark.levels)
    return True


def _erase(library: TemplateLibrary, template_id: str, version: int,
           levels: Iterable[tuple[str, str | None]]) -> None:
    """Delete a version's files (level files from their tiers too), keeping its tombstones."""
    for name, uri in levels:
        (library._open(uri) if uri else library.tier(name)).delete(layout.level_key(template_id, version, name))
    prefix = layout.version_prefix(template_id, version)
    for obj in list(library.store.list(prefix)):
        if _files({obj.key[len(prefix):]}) - {_MANIFEST}:
            library.store.delete(obj.key)


def _has_claim(names: Iterable[str]) -> bool:
    return any(layout.is_claim(n) for n in names)


def _has_mark(names: Iterable[str]) -> bool:
    return any(layout.is_mark(n) for n in names)


def _files(names: Iterable[str]) -> set[str]:
    """A version's files: the names under it but its claim's and its mark's (its tombstones)."""
    return {n for n in names if not layout.is_claim(n) and not layout.is_mark(n)}


def _check_keep(keep: int) -> None:
    if keep < 1:
        raise LibraryError("gc must keep at least one version")


def _doomed(published: list[int], pinned: set[int], keep: int) -> list[int]:
    """Published versions (ascending) past the newest ``keep`` that no alias points at."""
    return [v for v in published[:-keep] if v not in pinned]
